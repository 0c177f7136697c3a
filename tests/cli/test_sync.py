"""The `sync`, `status` and `diff` commands through click's CliRunner, end to end.

A bare repository is the remote (file://, or the loopback git HTTP server with Basic
auth), the API double is the cluster. Asserts exit codes, what stdout and stderr say,
and that a token in the repository URL shows nowhere.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mxgitops.cli import main
from mxgitops.kube import cluster
from tests.gitrepos.fixtures import GitRemote, run_git
from tests.helpers.gitsync import INSTANCE, NS, jobs_files, mxjob
from tests.kubeapi.harness import KubeAPI

SECRET = "s3cr3t-token"


@pytest.fixture(autouse=True)
def environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_isolation: None
) -> Iterator[None]:
    """No MXGITOPS_* from the caller, no ~/.kube/config, no $KUBECONFIG; the logger the
    CLI reconfigures is restored afterwards."""
    import os

    for name in list(os.environ):
        if name.startswith("MXGITOPS_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    logger = logging.getLogger("mxgitops")
    saved = (logger.handlers[:], logger.propagate, logger.level)
    yield
    logger.handlers[:], logger.propagate, logger.level = saved


@pytest.fixture
def remote(make_git_remote: Callable[..., GitRemote]) -> GitRemote:
    return make_git_remote("jobs", files=jobs_files("alpha", "beta"))


def invoke(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def sync_args(url: str, tmp_path: Path, kubeapi: KubeAPI | None, *extra: str) -> list[Any]:
    args: list[Any] = ["sync", "--repo", url, "--cache-dir", tmp_path / "cache", "--path", "jobs"]
    args += ["--namespace", NS, "--instance", INSTANCE]
    if kubeapi is not None:
        args += ["--kubeconfig", kubeapi.kubeconfig]
    return args + list(extra)


def everything(result: Result) -> str:
    return result.stdout + result.stderr


# -- sync and status --------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_sees_what_sync_created(
    remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    synced = invoke(*sync_args(remote.url, tmp_path, kubeapi))
    assert synced.exit_code == 0, everything(synced)
    selector = f"app.kubernetes.io/managed-by=mxgitops,mxgitops.io/instance={INSTANCE}"
    listed = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(kubeapi.kubeconfig),
            "get",
            "jobs",
            "-A",
            "-l",
            selector,
            "-o",
            "json",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    items = json.loads(listed.stdout)["items"]
    assert sorted(i["metadata"]["labels"]["mxgitops.io/job"] for i in items) == ["alpha", "beta"]
    assert all(i["metadata"]["namespace"] == NS for i in items)


def test_a_checkouts_work_tree_is_planned_as_it_is_unless_a_ref_is_given(
    remote: GitRemote, tmp_path: Path
) -> None:
    (remote.work / "jobs" / "gamma.yaml").write_text(mxjob("gamma"))  # not committed
    args = ["sync", "--repo", remote.work, "--path", "jobs", "--cache-dir", tmp_path / "cache"]
    args += ["--dry-run", "-n", NS]

    as_is = invoke(*args)
    committed = invoke(*args, "--ref", "main")

    assert as_is.exit_code == 0, everything(as_is)
    first, second = as_is.stdout.splitlines()[:2]
    assert first.startswith("Note: no cluster configured")
    assert second.startswith("Note: reading the work tree of")
    assert "gamma" in as_is.stdout
    assert committed.exit_code == 0, everything(committed)
    assert "gamma" not in committed.stdout and "alpha" in committed.stdout


def test_sync_then_status_shows_the_note(
    remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    synced = invoke(*sync_args(remote.url, tmp_path, kubeapi))
    assert synced.exit_code == 0, everything(synced)
    assert "create" in synced.stdout
    assert len(kubeapi.objects("jobs", NS)) == 2

    shown = invoke("status", "--repo", remote.url, "--cache-dir", tmp_path / "status-cache")
    assert shown.exit_code == 0, everything(shown)
    assert "default/alpha" in shown.stdout and "default/beta" in shown.stdout
    as_json = invoke(
        "status", "--repo", remote.url, "--cache-dir", tmp_path / "status-cache", "-o", "json"
    )
    assert json.loads(as_json.stdout)["commit"] == remote.rev()

    untouched = remote.commit({"README.md": "no sync yet\n"}, "unsynced")
    missing = invoke("status", "--repo", remote.url, "--cache-dir", tmp_path / "status-cache")
    assert missing.exit_code == 1
    assert untouched[:12] in missing.stderr


def test_force_push_is_reported(remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path) -> None:
    remote.commit(jobs_files("alpha", "beta", image="mxnet/python:bad"), "bad")
    assert invoke(*sync_args(remote.url, tmp_path, kubeapi)).exit_code == 0
    remote.rewrite_last_commit({"jobs/alpha.yaml": mxjob("alpha", image="mxnet/python:ok")})

    result = invoke(*sync_args(remote.url, tmp_path, kubeapi))

    assert result.exit_code == 0, everything(result)
    assert "force-pushed" in result.stdout


# -- dry run and no cluster -------------------------------------------------------------


def test_dry_run_without_cluster_says_so_and_exits_0(remote: GitRemote, tmp_path: Path) -> None:
    result = invoke(*sync_args(remote.url, tmp_path, None, "--dry-run"))
    assert result.exit_code == 0, everything(result)
    assert "no cluster configured" in result.stdout.splitlines()[0]
    assert remote.note(remote.rev()) is None


def test_real_sync_without_cluster_exits_2(remote: GitRemote, tmp_path: Path) -> None:
    result = invoke(*sync_args(remote.url, tmp_path, None))
    assert result.exit_code == 2, everything(result)
    assert "no cluster configured" in result.stderr
    assert "--kubeconfig" in result.stderr


# -- exit codes -------------------------------------------------------------------------


def test_invalid_manifest_exits_1(remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path) -> None:
    remote.commit({"jobs/broken.yaml": mxjob("broken").replace("WORKER", "CHIEF")}, "broken")
    result = invoke(*sync_args(remote.url, tmp_path, kubeapi))
    assert result.exit_code == 1, everything(result)
    assert "broken.yaml" in result.stdout


@pytest.mark.parametrize(
    ("extra", "file", "expected"),
    [
        (["--parallelism", "0"], None, "parallelism"),
        ([], "nmespace: typo\n", "nmespace"),
        ([], "prune: many\n", "prune"),
    ],
)
def test_usage_and_config_errors_exit_2(
    make_git_remote: Callable[..., GitRemote],
    kubeapi: KubeAPI,
    tmp_path: Path,
    extra: list[str],
    file: str | None,
    expected: str,
) -> None:
    files = jobs_files("alpha")
    if file is not None:
        files[".mxgitops.yaml"] = file
    remote = make_git_remote("jobs", files=files)
    result = invoke(*sync_args(remote.url, tmp_path, kubeapi, *extra))
    assert result.exit_code == 2, everything(result)
    assert expected in result.stderr
    assert kubeapi.objects("jobs", NS) == []


def test_git_error_exits_3(tmp_path: Path, kubeapi: KubeAPI) -> None:
    missing = (tmp_path / "nowhere.git").as_uri()
    result = invoke(*sync_args(missing, tmp_path, kubeapi))
    assert result.exit_code == 3, everything(result)
    assert result.stderr.startswith("Error: ")


def test_unreachable_cluster_exits_4(
    remote: GitRemote, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = tmp_path / "dead-kubeconfig"
    from tests.kubeapi.harness import write_kubeconfig

    write_kubeconfig(kubeconfig, "http://127.0.0.1:1")
    slept: list[float] = []
    defaults = dict(cluster.connect.__kwdefaults__ or {})
    monkeypatch.setattr(cluster.connect, "__kwdefaults__", {**defaults, "sleep": slept.append})
    started = time.monotonic()

    result = invoke(*sync_args(remote.url, tmp_path, None, "--kubeconfig", str(kubeconfig)))

    assert result.exit_code == 4, everything(result)
    assert "cannot reach the Kubernetes API at http://127.0.0.1:1" in result.stderr
    assert time.monotonic() - started < 3
    assert slept, "the client retried without asking the retry policy to wait"


def test_lease_held_exits_5(remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    kubeapi.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": f"mxgitops-{INSTANCE}", "namespace": NS},
            "spec": {
                "holderIdentity": "someone-else",
                "renewTime": now,
                "acquireTime": now,
                "leaseDurationSeconds": 600,
            },
        },
        namespace=NS,
    )
    result = invoke(*sync_args(remote.url, tmp_path, kubeapi))
    assert result.exit_code == 5, everything(result)
    assert "someone-else" in result.stderr
    assert kubeapi.objects("jobs", NS) == []
    assert remote.note(remote.rev()) is None


# -- precedence: flag > environment > .mxgitops.yaml > default --------------------------


def test_namespace_precedence(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    remote = make_git_remote(
        "jobs", files={**jobs_files("alpha"), ".mxgitops.yaml": "namespace: from-file\n"}
    )

    def namespaces(*args: str, env: dict[str, str] | None = None) -> set[str]:
        base = ["sync", "--repo", remote.url, "--cache-dir", str(tmp_path / "cache")]
        base += ["--path", "jobs", "--kubeconfig", str(kubeapi.kubeconfig), "--dry-run"]
        result = invoke(*base, *args, "-o", "json", env=env)
        assert result.exit_code == 0, everything(result)
        return {job["namespace"] for job in json.loads(result.stdout)["jobs"]}

    assert namespaces() == {"from-file"}
    assert namespaces(env={"MXGITOPS_NAMESPACE": "from-env"}) == {"from-env"}
    assert namespaces("-n", "from-flag", env={"MXGITOPS_NAMESPACE": "from-env"}) == {"from-flag"}
    plain = make_git_remote("plain", files=jobs_files("alpha"))
    base = ["sync", "--repo", plain.url, "--cache-dir", str(tmp_path / "cache"), "--path"]
    result = invoke(*base, "jobs", "--dry-run", "-o", "json")
    assert {j["namespace"] for j in json.loads(result.stdout)["jobs"]} == {"default"}


# -- secrets ----------------------------------------------------------------------------


def test_token_in_url_shows_nowhere(
    make_git_remote: Callable[..., GitRemote],
    make_git_http_server: Callable[..., Any],
    kubeapi: KubeAPI,
    tmp_path: Path,
) -> None:
    remote = make_git_remote("secured", files=jobs_files("alpha", "beta"))
    server = make_git_http_server(remote.bare.parent, logins={("user", SECRET)})
    url = server.url("secured", f"user:{SECRET}")

    runs = [
        invoke(*sync_args(url, tmp_path, kubeapi)),
        invoke(*sync_args(url, tmp_path, kubeapi, "--log-format", "json", "-v")),
        invoke(*sync_args(url, tmp_path, kubeapi, "--dry-run", "-v", "-o", "json")),
        invoke("status", "--repo", url, "--cache-dir", tmp_path / "cache"),
    ]

    for result in runs:
        assert result.exit_code == 0, everything(result)
        assert SECRET not in everything(result)
    assert "127.0.0.1" in runs[1].stderr  # the URL is logged, redacted
    note = remote.note(remote.rev())
    assert note is not None and SECRET not in note
    leaked = subprocess.run(
        ["grep", "-rl", SECRET, str(tmp_path / "cache")], capture_output=True, check=False
    )
    assert leaked.stdout == b"", f"token stored in {leaked.stdout.decode()}"
    assert len(kubeapi.objects("jobs", NS)) == 2


def test_token_from_the_environment_for_sync_and_status(
    make_git_remote: Callable[..., GitRemote],
    make_git_http_server: Callable[..., Any],
    kubeapi: KubeAPI,
    tmp_path: Path,
) -> None:
    remote = make_git_remote("secured", files=jobs_files("alpha"))
    server = make_git_http_server(remote.bare.parent, logins={("x-access-token", SECRET)})
    url, env = server.url("secured"), {"MXGITOPS_GIT_TOKEN": SECRET}

    refused = invoke(*sync_args(url, tmp_path, kubeapi))
    synced = invoke(*sync_args(url, tmp_path, kubeapi), env=env)
    status = invoke("status", "--repo", url, "--cache-dir", tmp_path / "cache", env=env)

    assert refused.exit_code == 3, everything(refused)
    for result in (synced, status):
        assert result.exit_code == 0, everything(result)
        assert SECRET not in everything(result)
    assert "alpha" in status.stdout


def test_token_in_url_of_unreachable_remote_exits_3_without_it(tmp_path: Path) -> None:
    url = "http://user:s3cr3t@127.0.0.1:1/x.git"
    for extra in ([], ["--log-format", "json", "-v"]):
        result = invoke(*sync_args(url, tmp_path, None, "--dry-run", *extra))
        assert result.exit_code == 3, everything(result)
        assert "s3cr3t" not in everything(result)
        assert "127.0.0.1:1" in result.stderr
    status = invoke("status", "--repo", url, "--cache-dir", tmp_path / "cache")
    assert status.exit_code == 3 and "s3cr3t" not in everything(status)


# -- logs -------------------------------------------------------------------------------


def test_json_logs_are_one_object_per_line(
    remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    result = invoke(*sync_args(remote.url, tmp_path, kubeapi, "--log-format", "json", "-v"))
    assert result.exit_code == 0, everything(result)
    lines = result.stderr.splitlines()
    assert lines
    entries = [json.loads(line) for line in lines]
    assert all({"time", "level", "message"} <= set(e) for e in entries)
    assert any(e["message"] == "sync finished" and e["ok"] is True for e in entries)


# -- diff -------------------------------------------------------------------------------


def test_diff_markdown_in_a_checkout(make_git_remote: Callable[..., GitRemote]) -> None:
    remote = make_git_remote("jobs", files=jobs_files("alpha", "beta", "gamma"))
    base = remote.rev()
    remote.commit(
        {
            "jobs/beta.yaml": mxjob("beta", image="mxnet/python:2.0"),
            "jobs/gamma.yaml": None,
            "jobs/delta.yaml": mxjob("delta"),
            "jobs/broken.yaml": mxjob("broken").replace("WORKER", "CHIEF"),
        },
        "change",
    )

    result = invoke("diff", base, "HEAD", "--repo", remote.work, "--path", "jobs", "-o", "markdown")

    assert result.exit_code == 1, everything(result)  # HEAD has a broken manifest
    out = result.stdout
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.count("|") > 3}
    assert "default/delta" in rows["added"] and "default/beta" in rows["changed"]
    assert "default/gamma" in rows["removed"]
    assert "broken.yaml" in out and "CHIEF" in out
    assert "alpha" not in out.replace("unchanged", "")


def test_a_duplicate_names_its_twin_from_the_repositorys_root(
    remote: GitRemote, tmp_path: Path
) -> None:
    """`sync --dry-run` names both files of a duplicate as validate does (`jobs/...`)."""
    remote.commit({"jobs/twin.yaml": mxjob("alpha")}, "a twin")
    result = invoke(*sync_args(remote.url, tmp_path, None, "--dry-run"))
    problems = [line for line in result.stdout.splitlines() if "more than once" in line]
    assert problems and all("(also at jobs/" in line for line in problems), result.stdout
    assert any(line.lstrip().startswith("Invalid: jobs/twin.yaml:") for line in problems)


def test_a_dry_run_writes_only_its_caches(remote: GitRemote, tmp_path: Path) -> None:
    """What --help says: nothing changes in the cluster (none here) or the repository;
    only --cache-dir is written (HOME, the test's, stays empty)."""
    before = run_git("for-each-ref", cwd=remote.bare)
    result = invoke(*sync_args(remote.url, tmp_path, None, "--dry-run"))
    assert result.exit_code == 0, everything(result)
    assert run_git("for-each-ref", cwd=remote.bare) == before
    assert list((tmp_path / "home").rglob("*")) == []
    assert any((tmp_path / "cache").rglob("*"))
    shown = " ".join(invoke("sync", "--help").output.split())
    assert "change nothing in the cluster or the repository (only the caches under" in shown
