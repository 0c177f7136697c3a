"""`mxgitops install` on the real parts: a fresh real control plane and node, the jobs
repository on a real Gitea (private), the project's image the tests build.

A wrong token stops it with one line before anything is applied (no write in the API
server's audit log, no object of install's); with the right one it brings up the
CronJob, runs the first sync on the node and prints its note, which is then on Gitea's
commit (the time from install's start to its return, the note read back, is printed:
docs/getting-started/cluster.md states it); run again with the same flags it says
nothing changed and writes nothing (the audit log); uninstall leaves no object of
install's labels (a LIST of every kind it makes) and its namespace goes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mxgitops.cli import ExitCode, main
from mxgitops.install.overlay import INSTALL_LABEL
from mxgitops.kube.installs import KINDS, kind_path
from mxgitops.outputs import report
from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.launcher import CLIENT
from tests.controlplane.projectimage import PROJECT_IMAGE
from tests.forges.webhooks import rarely
from tests.gitea.server import ADMIN, Gitea
from tests.gitrepos.fixtures import run_git

NAMESPACE = "mxgitops-install"
FIRST_SYNC_TIMEOUT = 300.0  # seconds: the image is on the node, the repository small
ASKS = "selfsubjectaccessreviews"  # the installing user's rights: asked, nothing stored


@pytest.fixture
def install_gitea(real_node: RealCluster, tmp_path: Path) -> Iterator[Gitea]:
    """A Gitea where the node's pods reach the host."""
    with Gitea(tmp_path / "gitea", host=real_node.plane.bind_address) as gitea:
        yield gitea


def install(cluster: RealCluster, tmp_path: Path, repo: str, token: str, *extra: str) -> Result:
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    args = ["install", "--repo", repo, "--token-file", str(token_file), "--image", PROJECT_IMAGE]
    args += ["--namespace", NAMESPACE, "--schedule", SCHEDULE, "--kubeconfig"]
    args += [str(cluster.kubeconfig), "--wait-timeout", str(FIRST_SYNC_TIMEOUT), *extra]
    env = {"MXGITOPS_CACHE_DIR": str(tmp_path / "cache")}
    return CliRunner().invoke(main, args, env=env)


SCHEDULE = rarely()  # no scheduled run while the test runs: each sync is install's
OTHER = "0 0 29 2 *"  # the 29th of February: another schedule that does not fire


def writes(cluster: RealCluster) -> list[dict[str, Any]]:
    """install's requests that write (its identity's, in the audit log)."""
    return [
        r
        for r in cluster.request_log
        if r["user"] == CLIENT and r["verb"] not in ("get", "list", "watch")
        and r["resource"] != ASKS
    ]  # fmt: skip


def installed(cluster: RealCluster) -> list[str]:
    """Every object carrying install's label, of every kind install makes."""
    found = []
    for kind, (_, _, namespaced) in KINDS.items():
        if kind in ("Job", "Pod"):
            continue
        path = kind_path(kind, NAMESPACE if namespaced else None)
        status, _, body = cluster.raw("GET", f"{path}?labelSelector={INSTALL_LABEL}={NAMESPACE}")
        items = body.get("items", []) if status == 200 and isinstance(body, dict) else []
        found += [f"{kind} {item['metadata']['name']}" for item in items]
    return found


def noted(work: Path, commit: str) -> str:
    run_git("fetch", "-q", "origin", "+refs/notes/mxgitops:refs/notes/mxgitops", cwd=work)
    return run_git("notes", "--ref=mxgitops", "show", commit, cwd=work)


@pytest.mark.timeout(900)
def test_install_runs_the_first_sync_then_changes_nothing_and_uninstalls(
    node_cluster: RealCluster, install_gitea: Gitea, tmp_path: Path
) -> None:
    cluster, gitea = node_cluster, install_gitea
    repo = gitea.create_repository("jobs")
    token = gitea.token("install", ["write:repository"])
    work = tmp_path / "work"
    work.mkdir()
    run_git("init", "-q", "-b", "main", cwd=work)
    run_git("remote", "add", "origin", repo.replace("://", f"://{ADMIN}:{token}@"), cwd=work)
    (work / "README.md").write_text("The jobs of this team.\n")
    run_git("add", "-A", cwd=work)
    run_git("commit", "-q", "-m", "first", cwd=work)
    run_git("push", "-q", "origin", "HEAD:main", cwd=work)
    commit = run_git("rev-parse", "HEAD", cwd=work)
    try:
        cluster.clear_log()
        wrong = install(cluster, tmp_path, repo, "0" * 40)
        assert wrong.exit_code == ExitCode.GIT, wrong.output
        (line,) = wrong.output.splitlines()
        assert line.startswith("problem: repository: "), line
        print(f"a wrong token: {line}")
        assert writes(cluster) == [] and installed(cluster) == []

        started = time.monotonic()
        first = install(cluster, tmp_path, repo, token)
        took = time.monotonic() - started
        print(f"install to its first note read back: {took:.1f} s")
        assert first.exit_code == ExitCode.OK, first.output
        assert f"CronJob {NAMESPACE}/mxgitops created" in first.output
        assert "first sync: Complete, exit code 0" in first.output
        assert f"the note on {commit[:12]}" in first.output
        assert token not in first.output
        summary, unreadable = report.read_note(noted(work, commit))
        assert summary is not None and summary.commit == commit, unreadable

        cluster.clear_log()
        again = install(cluster, tmp_path, repo, token)
        assert again.exit_code == ExitCode.OK, again.output
        assert again.output.startswith("nothing changed"), again.output
        assert writes(cluster) == []
        reads = [r for r in cluster.request_log if r["user"] == CLIENT]
        assert reads, "the second install read what it would apply"

        # A changed flag: the server's diff first (nothing written), then only the
        # CronJob changes (and, as anything changed, a sync starts).
        cluster.clear_log()
        dry = install(cluster, tmp_path, repo, token, "--schedule", OTHER, "--dry-run")
        assert dry.exit_code == ExitCode.OK, dry.output
        assert dry.output.splitlines()[0] == f"CronJob {NAMESPACE}/mxgitops configured (dry run)"
        assert f"+  schedule: {OTHER}" in dry.output and f"-  schedule: {SCHEDULE}" in dry.output
        assert {(w["verb"], w["query"].get("dryRun")) for w in writes(cluster)} == {
            ("patch", "All")
        }
        cluster.clear_log()
        changed = install(cluster, tmp_path, repo, token, "--schedule", OTHER)
        assert changed.exit_code == ExitCode.OK, changed.output
        assert changed.output.splitlines()[0] == f"CronJob {NAMESPACE}/mxgitops configured"
        assert [(w["verb"], w["resource"]) for w in writes(cluster)] == [
            ("patch", "cronjobs"),
            ("create", "jobs"),
        ]
    finally:
        gone = CliRunner().invoke(
            main, ["uninstall", "--namespace", NAMESPACE, "--kubeconfig", str(cluster.kubeconfig)]
        )
    assert gone.exit_code == ExitCode.OK, gone.output
    assert f"Namespace {NAMESPACE} deleted" in gone.output
    namespace = f"/api/v1/namespaces/{NAMESPACE}"
    wait_for(  # the namespace controller empties it first (the Lease, the ledger, pods)
        "install's namespace to go",
        lambda: cluster.raw("GET", namespace)[0] == 404 or None,
        timeout=180,
    )
    assert installed(cluster) == []


def test_a_dry_run_on_a_fresh_cluster_writes_nothing(
    control_plane: RealCluster, make_git_remote: Any, tmp_path: Path
) -> None:
    """Before the namespace exists the server cannot judge the objects in it (a dry
    run of them is refused, NotFound): they are shown as rendered, and said so."""
    remote = make_git_remote("jobs", files={"README.md": "jobs\n"})
    args = ["install", "--repo", remote.url, "--image", PROJECT_IMAGE, "--dry-run"]
    args += ["--namespace", "mxgitops-dry", "--kubeconfig", str(control_plane.kubeconfig)]
    control_plane.clear_log()
    result = CliRunner().invoke(main, args, env={"MXGITOPS_CACHE_DIR": str(tmp_path / "c")})
    assert result.exit_code == ExitCode.OK, result.output
    assert "Namespace mxgitops-dry created (dry run)" in result.output
    assert "CronJob mxgitops-dry/mxgitops created (dry run)" in result.output
    assert "namespace mxgitops-dry does not exist yet" in result.output
    assert {(w["verb"], w["query"].get("dryRun")) for w in writes(control_plane)} == {
        ("patch", "All")
    }
    assert control_plane.raw("GET", "/api/v1/namespaces/mxgitops-dry")[0] == 404
