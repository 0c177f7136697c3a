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

from tests.controlplane.harness import RealCluster, wait_for
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.node import (
    RESULT,
    TRAIN_TIMEOUT,
    cli,
    job_state,
    log_of,
    manifest,
    pods_of,
    replica,
    sync_args,
)


def role_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"]["job_type"])


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "mxnet"]
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


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
