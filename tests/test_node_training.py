"""A distributed MXNet job really trains on the real node.

A jobs repository with one ``dist`` job (1 scheduler, 2 servers, 3 workers) of the
training image (``tests/controlplane/rootfs.py``, its script
``tests/controlplane/training/train.py``) is synced by ``mxgitops sync``; the real
job controller starts the pods, containerd runs them, the workers reach the scheduler
at the ``DMLC_PS_ROOT_URI`` mxgitops rendered (a Service name, resolved by CoreDNS and
routed by kube-proxy), and ps-lite's ``dist_sync`` kvstore trains a linear model.
The test fails unless every worker's log holds its training result with the loss
fallen and the weights equal across workers, the job reaches Succeeded, and
``mxgitops status`` reads Succeeded from the note.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from mxgitops.cli import main
from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.rootfs import TRAINING_IMAGE
from tests.gitfixtures import GitRemote

NS = "default"
TRAIN_TIMEOUT = 300.0
RESULT = "training result: "


def training_container() -> dict[str, Any]:
    """The training image's container: the script baked into it, small requests (what
    Kueue counts against a ClusterQueue's quota, where the job is queued)."""
    return {
        "name": "mxnet",
        "image": TRAINING_IMAGE,
        "imagePullPolicy": "Never",  # no registry: the image was imported into containerd
        "command": ["python3", "/opt/mxtrain/train.py"],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
    }


def replica(kind: str, count: int, **extra: Any) -> dict[str, Any]:
    return {
        "replicas": count,
        "mxReplicaType": kind,
        "template": {"spec": {"restartPolicy": "Never", "containers": [training_container()]}},
        **extra,
    }


def manifest(name: str, mode: str, replicas: list[dict[str, Any]]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "mxnet.mlkube.io/v1beta1",
            "kind": "MxJob",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"jobMode": mode, "replicaSpecs": replicas},
        }
    )


def cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def sync_args(remote: GitRemote, cluster: RealCluster, cache: Path) -> list[str]:
    return [
        "--repo",
        remote.url,
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--cache-dir",
        str(cache),
        "--instance",
        "node",
        "--state-namespace",
        "mxgitops",
    ]


def pods_of(cluster: RealCluster, job: str) -> list[dict[str, Any]]:
    return [
        p
        for p in cluster.objects("pods", NS)
        if p["metadata"].get("labels", {}).get("job-name", "").startswith(f"{job}-")
    ]


def role_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"]["job_type"])


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "mxnet"]
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def log_of(cluster: RealCluster, pod: dict[str, Any]) -> str:
    path = f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}/log"
    response = cluster.rest.session.get(
        cluster.url + path, params={"container": "mxnet"}, timeout=30
    )
    response.raise_for_status()
    return response.text


def job_state(remote: GitRemote, cache: Path, name: str) -> dict[str, Any]:
    out = cli("status", "--repo", remote.url, "--cache-dir", str(cache), "-o", "json")
    jobs = {job["name"]: job for job in json.loads(out)["jobs"]}
    return dict(jobs[name])


def test_a_dist_job_trains_across_three_workers_and_succeeds(
    node_cluster: RealCluster,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    job = manifest(
        "linreg",
        "dist",
        [replica("SCHEDULER", 1), replica("SERVER", 2), replica("WORKER", 3)],
    )
    remote = make_git_remote("jobs", files={"jobs/linreg.yaml": job})
    cache = tmp_path / "cache"
    started = time.monotonic()
    cli("sync", *sync_args(remote, node_cluster, cache))

    def six_pods() -> list[dict[str, Any]] | None:
        pods = pods_of(node_cluster, "linreg")
        return pods if len(pods) == 6 else None

    pods = wait_for("six pods of linreg", six_pods, timeout=60)
    root = {env_of(p)["DMLC_PS_ROOT_URI"] for p in pods}
    assert len(root) == 1, root  # every replica was told the same scheduler address

    def finished() -> list[dict[str, Any]] | None:
        pods = pods_of(node_cluster, "linreg")
        phases = {p["metadata"]["name"]: p["status"].get("phase") for p in pods}
        if any(phase == "Failed" for phase in phases.values()):
            raise AssertionError(f"a replica failed: {phases}\n" + logs(pods))
        return pods if all(phase == "Succeeded" for phase in phases.values()) else None

    def logs(pods: list[dict[str, Any]]) -> str:
        return "\n".join(f"--- {p['metadata']['name']}\n{log_of(node_cluster, p)}" for p in pods)

    pods = wait_for("linreg's replicas to succeed", finished, timeout=TRAIN_TIMEOUT)
    trained = time.monotonic() - started
    workers = [p for p in pods if role_of(p) == "WORKER"]
    results = []
    for pod in workers:
        text = log_of(node_cluster, pod)
        print(f"{pod['metadata']['name']}:\n{text}")
        lines = [line for line in text.splitlines() if line.startswith(RESULT)]
        assert lines, f"no training result in {pod['metadata']['name']}'s log:\n{text}"
        results.append(json.loads(lines[-1].removeprefix(RESULT)))
    assert sorted(r["rank"] for r in results) == [0, 1, 2]
    for result in results:
        assert result["kvstore"] == "dist_sync" and result["workers"] == 3, result
        assert result["loss_after"] < result["loss_before"] / 100, result
    assert len({tuple(r["weights"]) for r in results}) == 1, results  # one model, not three
    print(f"dist job trained and succeeded in {trained:.1f} s")

    cli("sync", *sync_args(remote, node_cluster, cache))  # the note records the end state
    state = job_state(remote, cache, "linreg")
    assert state["state"] == "Succeeded", state
    note = remote.note(remote.rev())
    assert note is not None and "linreg" in note and "Succeeded" in note, note
