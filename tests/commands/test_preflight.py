"""`mxgitops check` (mxgitops/commands/preflight.py): each missing prerequisite is one line saying
what is missing and how to fix it, and the exit code is the CLI's for the first problem.

On the real control plane (no StorageClass until the test makes one, a jobs' namespace
missing until it makes it): a local bare repository is pushed to; the same repository
served read-only (git daemon, whose receive-pack is off) and a real Gitea with a token
of `read:repository` scope refuse the push, and the line says so. kustomize's version
is read from the kubectl on PATH (the control plane's build); the one case that cannot
be had here, a kubectl whose kustomize is older than 5, is the version string kubectl
1.24 printed.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from mxgitops.cli import ExitCode, main
from mxgitops.commands.preflight import State, kustomize_finding, kustomize_version, python_finding
from tests.controlplane.harness import RealCluster
from tests.gitea.server import ADMIN, Gitea
from tests.gitrepos.fixtures import GitRemote, run_git
from tests.helpers.gitsync import gitea

__all__ = ["gitea"]  # the Gitea fixture of the statuses' tests, used here too

MISSING = "preflight-missing"  # a jobs' namespace no other test makes
STORAGE_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"
DEADLINE = 30.0


def mxjob(name: str, namespace: str | None = None) -> str:
    container = {"name": "mxnet", "image": "mxnet/python:1.9.1", "args": ["train.py"]}
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return yaml.safe_dump(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MXJob",
            "metadata": metadata,
            "spec": {
                "mxReplicaSpecs": {
                    "Worker": {"replicas": 1, "template": {"spec": {"containers": [container]}}}
                }
            },
        }
    )


# The repository's namespace (the default policy lets its jobs go there only).
JOBS = {
    ".mxgitops.yaml": f"namespace: {MISSING}\n",
    "jobs/a.yaml": mxjob("a"),
    "jobs/b.yaml": mxjob("b"),
}


def run_check(*args: str, token: str | None = None) -> Result:
    env = {"MXGITOPS_GIT_TOKEN": token} if token else {}
    return CliRunner().invoke(main, ["check", *args], env=env)


def lines(result: Result, state: State) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith(f"{state}: ")]


# -- this machine ---------------------------------------------------------------------


def test_python_older_than_311_is_a_problem() -> None:
    assert python_finding((3, 11, 0)).state is State.OK
    old = python_finding((3, 10, 12))
    assert str(old) == "problem: python: Python 3.10.12, 3.11 or later needed; install a newer one"


def test_kustomize_older_than_5_is_a_problem() -> None:
    # kubectl 1.24's `version --client -o json`: "kustomizeVersion": "v4.5.4"
    old = kustomize_finding("v4.5.4")
    assert old.state is State.PROBLEM
    assert "v4.5.4 is too old" in old.text and "kubectl 1.27 or later" in old.text
    assert kustomize_finding(None).state is State.UNKNOWN
    assert kustomize_finding("{Version:kustomize/v5.4.2 GitCommit:x}").state is State.OK


def test_kustomize_is_read_from_kubectl_on_path() -> None:
    shown = subprocess.run(
        ["kubectl", "version", "--client", "-o", "json"], capture_output=True, text=True
    ).stdout
    assert kustomize_version() == json.loads(shown)["kustomizeVersion"]


def test_an_unreachable_cluster_exits_4(tmp_path: Path, make_git_remote: Any) -> None:
    remote: GitRemote = make_git_remote("jobs", files=JOBS)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    cache = str(tmp_path / "cache")
    args = ["--repo", remote.url, "--cache-dir", cache, "--kubeconfig", str(kubeconfig)]
    result = run_check(*args, "--request-timeout", "1")
    assert result.exit_code == ExitCode.CLUSTER, result.output
    (line,) = lines(result, State.PROBLEM)
    assert line.startswith(
        f"problem: cluster: cannot reach the Kubernetes API at http://127.0.0.1:{port}"
    )
    assert line.endswith("; pass --kubeconfig and --context of the cluster to install in")


# -- the real control plane -----------------------------------------------------------


@pytest.fixture
def plane(control_plane: RealCluster) -> Iterator[RealCluster]:
    """The real control plane with no StorageClass and no namespace MISSING, as found."""
    control_plane.wipe()
    assert control_plane.rest.get(STORAGE_CLASSES)["items"] == []
    yield control_plane
    for item in control_plane.rest.get(STORAGE_CLASSES)["items"]:
        control_plane.rest.delete(f"{STORAGE_CLASSES}/{item['metadata']['name']}")
    if control_plane.rest.get_or_none(f"/api/v1/namespaces/{MISSING}") is not None:
        control_plane.rest.delete(f"/api/v1/namespaces/{MISSING}")


def default_storage_class(plane: RealCluster) -> None:
    plane.rest.create(
        STORAGE_CLASSES,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": "standard",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "kubernetes.io/no-provisioner",
        },
    )


def test_each_missing_prerequisite_is_one_line(
    plane: RealCluster, make_git_remote: Any, tmp_path: Path
) -> None:
    remote: GitRemote = make_git_remote("jobs", files=JOBS)
    args = ["--repo", remote.url, "--cache-dir", str(tmp_path / "cache")]
    args += ["--kubeconfig", str(plane.kubeconfig)]
    result = run_check(*args)
    assert lines(result, State.PROBLEM) == [
        "problem: storage: no default StorageClass: the Git cache's PersistentVolumeClaim "
        "(the overlay's cache.yaml) would stay Pending; mark one default (kubectl annotate "
        "storageclass NAME storageclass.kubernetes.io/is-default-class=true) or name one in "
        "cache.yaml (spec.storageClassName)",
        f"problem: namespace {MISSING}: does not exist, and 2 jobs (jobs/a.yaml, "
        f"jobs/b.yaml) go there: create it (kubectl create namespace {MISSING}); mxgitops "
        "creates no namespace",
    ]
    assert result.exit_code == ExitCode.FAILED
    assert f"ok: notes: the credential may push to {remote.url}" in result.output
    assert "ok: cluster: Kubernetes v1.34" in result.output
    # The scratch ref the push proved with is gone.
    assert run_git("for-each-ref", "refs/mxgitops", cwd=remote.bare) == ""

    default_storage_class(plane)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MISSING}}
    plane.rest.create("/api/v1/namespaces", namespace)
    fixed = run_check(*args)
    assert lines(fixed, State.PROBLEM) == [], fixed.output
    assert "ok: storage: default StorageClass standard" in fixed.output
    assert f"ok: namespace {MISSING}: exists, for 2 jobs (jobs/a.yaml, jobs/b.yaml)" in fixed.output
    assert fixed.exit_code == ExitCode.OK


@contextmanager
def served_read_only(bare: Path) -> Iterator[str]:
    """`bare` over git://, by git daemon: fetch works, push is refused (receive-pack is
    a service git daemon runs only when told to)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    daemon = subprocess.Popen(
        ["git", "daemon", "--export-all", f"--base-path={bare.parent}", "--listen=127.0.0.1",
         f"--port={port}", "--reuseaddr", str(bare.parent)],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert daemon.poll() is None and time.monotonic() < deadline, "git daemon"
                time.sleep(0.05)
        yield f"git://127.0.0.1:{port}/{bare.name}"
    finally:
        daemon.terminate()
        daemon.wait(timeout=DEADLINE)


def test_a_read_only_repository_is_a_problem_of_the_notes(
    plane: RealCluster, make_git_remote: Any, tmp_path: Path
) -> None:
    remote: GitRemote = make_git_remote("jobs", files={"jobs/a.yaml": mxjob("a")})
    default_storage_class(plane)
    with served_read_only(remote.bare) as url:
        args = ["--repo", url, "--cache-dir", str(tmp_path / "cache")]
        result = run_check(*args, "--kubeconfig", str(plane.kubeconfig))
        (line,) = lines(result, State.PROBLEM)
        assert line.startswith(f"problem: notes: the credential cannot push to {url} (")
        assert "access denied or repository not exported" in line
        assert line.endswith("or set MXGITOPS_NOTES=false")
        assert result.exit_code == ExitCode.GIT
        off = run_check(*args, "--no-notes", "--kubeconfig", str(plane.kubeconfig))
        assert lines(off, State.PROBLEM) == [] and off.exit_code == ExitCode.OK


def test_a_read_only_token_on_a_forge_reads_so(
    gitea: Gitea, plane: RealCluster, tmp_path: Path, git_isolation: None
) -> None:
    """On a forge, a token without write access is refused at the push (Gitea says
    "remote: Forbidden"): the line quotes the forge and says which scope to give."""
    url = gitea.create_repository("preflight")
    writer = gitea.token("preflight-write", ["write:repository"])
    work = tmp_path / "work"
    work.mkdir()
    run_git("init", "-q", "-b", "main", str(work), cwd=tmp_path)
    (work / "a.yaml").write_text(mxjob("a"))
    run_git("add", "-A", cwd=work)
    run_git("commit", "-q", "-m", "jobs", cwd=work)
    run_git("push", "-q", url.replace("://", f"://{ADMIN}:{writer}@"), "main", cwd=work)
    default_storage_class(plane)
    reader = gitea.token("preflight-read", ["read:repository"])
    repo = url.replace("://", f"://{ADMIN}@")
    args = ["--repo", repo, "--cache-dir", str(tmp_path / "cache")]
    args += ["--kubeconfig", str(plane.kubeconfig)]
    refused = run_check(*args, token=reader)
    (line,) = lines(refused, State.PROBLEM)
    assert line.startswith("problem: notes: the credential cannot push to http://")
    assert "(remote: Forbidden)" in line and "Gitea: write:repository" in line
    assert reader not in refused.output
    print(line)  # how it reads, for the manual
    assert refused.exit_code == ExitCode.GIT
    allowed = run_check(*args, token=writer)
    assert lines(allowed, State.PROBLEM) == [] and allowed.exit_code == ExitCode.OK


def test_a_path_the_repository_has_not_is_a_problem_of_the_repository(
    tmp_path: Path, make_git_remote: Any
) -> None:
    remote: GitRemote = make_git_remote("jobs", files=JOBS)
    args = ["--repo", remote.url, "--cache-dir", str(tmp_path / "cache"), "--path", "jobz"]
    result = run_check(*args, "--kubeconfig", str(tmp_path / "none"))
    problems = lines(result, State.PROBLEM)
    assert problems[0] == "problem: repository: path 'jobz' does not exist in the jobs repository"
    assert problems[1] == f"problem: cluster: kubeconfig {tmp_path / 'none'} does not exist"
    assert result.exit_code == ExitCode.USAGE  # the first problem's, as a sync would exit
