"""`mxgitops install --receiver` on the real parts: a push to the real Gitea starts a
sync through the receiver install made, and the sync's note lands on the pushed commit.

install brings up the CronJob and the receiver's Deployment, Service and Secret, and
waits for its first sync. The receiver's pod is made from the Deployment's template
(tests/helpers/deployments.py: these control planes run no Deployment controller), its
Service made a NodePort, and the Gitea repository's push webhook pointed there with the
secret given to install. A commit pushed then gets a Job started by the receiver (its
push annotation names the Gitea delivery) and a note."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from mxgitops.cli import ExitCode, main
from mxgitops.receiver.manualjob import PUSH_ANNOTATION
from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.projectimage import PROJECT_IMAGE
from tests.forges.webhooks import SECRET, rarely
from tests.gitea.server import ADMIN, Gitea
from tests.gitrepos.fixtures import run_git
from tests.helpers.deployments import node_port, pod_of_deployment, ready

NAMESPACE = "mxgitops-install-push"
RECEIVER = "mxgitops-receiver"
FIRST_SYNC_TIMEOUT = 300.0  # seconds: install's own wait (tests/install/test_real.py's)
PUSH_TIMEOUT = 120.0  # seconds from a push to its note, at most


@pytest.fixture
def push_gitea(real_node: RealCluster, tmp_path: Path) -> Iterator[Gitea]:
    """A Gitea where the node's pods reach the host."""
    with Gitea(tmp_path / "gitea", host=real_node.plane.bind_address) as gitea:
        yield gitea


def noted(work: Path, commit: str) -> bool:
    run_git("fetch", "-q", "origin", "+refs/notes/mxgitops:refs/notes/mxgitops", cwd=work)
    listed = run_git("notes", "--ref=mxgitops", "list", cwd=work)
    return any(line.split()[-1] == commit for line in listed.splitlines())


def commit_and_push(work: Path, name: str, text: str) -> str:
    (work / name).write_text(text)
    run_git("add", "-A", cwd=work)
    run_git("commit", "-q", "-m", f"add {name}", cwd=work)
    run_git("push", "-q", "origin", "HEAD:main", cwd=work)
    return run_git("rev-parse", "HEAD", cwd=work)


@pytest.mark.timeout(900)
def test_install_receiver_brings_a_push_started_sync(
    node_cluster: RealCluster, push_gitea: Gitea, tmp_path: Path
) -> None:
    cluster, gitea = node_cluster, push_gitea
    repo = gitea.create_repository("jobs")
    token = gitea.token("install", ["write:repository"])
    work = tmp_path / "work"
    work.mkdir()
    run_git("init", "-q", "-b", "main", cwd=work)
    run_git("remote", "add", "origin", repo.replace("://", f"://{ADMIN}:{token}@"), cwd=work)
    commit_and_push(work, "README.md", "The jobs of this team.\n")
    (tmp_path / "token").write_text(token + "\n")
    (tmp_path / "webhook").write_bytes(SECRET)
    args = ["install", "--repo", repo, "--token-file", str(tmp_path / "token"), "--receiver"]
    args += ["--webhook-secret-file", str(tmp_path / "webhook"), "--image", PROJECT_IMAGE]
    args += ["--namespace", NAMESPACE, "--schedule", rarely(), "--kubeconfig"]
    args += [str(cluster.kubeconfig), "--wait-timeout", str(FIRST_SYNC_TIMEOUT)]
    env = {"MXGITOPS_CACHE_DIR": str(tmp_path / "cache")}
    try:
        installed = CliRunner().invoke(main, args, env=env)
        assert installed.exit_code == ExitCode.OK, installed.output
        assert f"Deployment {NAMESPACE}/{RECEIVER} created" in installed.output
        pod = pod_of_deployment(cluster, NAMESPACE, RECEIVER)
        wait_for("the receiver's pod Ready", lambda: ready(cluster, NAMESPACE, pod), 180)
        address, port = node_port(cluster, NAMESPACE, RECEIVER)
        gitea.api(
            "POST",
            f"/repos/{ADMIN}/jobs/hooks",
            json={
                "type": "gitea",
                "config": {
                    "url": f"http://{address}:{port}/webhook",
                    "content_type": "json",
                    "secret": SECRET.decode(),
                },
                "events": ["push"],
                "branch_filter": "main",
                "active": True,
            },
        )
        commit = commit_and_push(work, "NOTES.md", "Pushed after install.\n")
        wait_for("the pushed commit's note", lambda: noted(work, commit) or None, PUSH_TIMEOUT)
        pushes = [
            (job["metadata"].get("annotations") or {}).get(PUSH_ANNOTATION, "")
            for job in cluster.objects("jobs", NAMESPACE)
        ]
        assert any(push.startswith("gitea delivery") for push in pushes), pushes
    finally:
        gone = CliRunner().invoke(
            main, ["uninstall", "--namespace", NAMESPACE, "--kubeconfig", str(cluster.kubeconfig)]
        )
        assert gone.exit_code == ExitCode.OK, gone.output
        wait_for(
            "install's namespace to go",
            lambda: cluster.raw("GET", f"/api/v1/namespaces/{NAMESPACE}")[0] == 404 or None,
            timeout=180,
        )
