"""A dist job under ``restartPolicy: Never`` whose worker exits 1, on the real node.

Kubeflow's operator fails the MXJob on the first failed pod of a ``Never`` replica:
a restarted ps-lite worker does not rejoin a running job, so a retry would hang,
holding the job's other replicas. mxgitops renders such a replica's batch Job with
``backoffLimit: 0`` (the real job controller does not retry it), reads the job as
Failed in the sync after the failure, and that sync stops the replicas still running
(the scheduler, the servers and the other workers, which wait for the lost worker
forever). The test fails if the worker is retried or anything of the job is left
running.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.rootfs import TRAINING_IMAGE
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.node import NS, cli, job_state, pods_of, sync_args

NAME = "lost-worker"
# Worker 1 gives up before it reaches the scheduler; every other replica trains, so
# it waits for worker 1 (ps-lite's scheduler waits until all 3 workers registered).
SCRIPT = (
    'if [ "$DMLC_ROLE" = worker ] && [ "$DMLC_WORKER_ID" = 1 ]; then '
    "echo 'worker 1: no data shard'; exit 1; fi; exec python3 /opt/mxtrain/train.py"
)


def role(count: int) -> dict[str, Any]:
    container = {
        "name": "mxnet",
        "image": TRAINING_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", SCRIPT],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
    }
    return {
        "replicas": count,
        "restartPolicy": "Never",
        "template": {"spec": {"containers": [container]}},
    }


def dist_job() -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MXJob",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {
                "mxReplicaSpecs": {
                    "Scheduler": role(1),
                    "Server": role(2),
                    "Worker": role(3),
                },
            },
        }
    )


def labels(pod: dict[str, Any]) -> tuple[str, str]:
    meta = pod["metadata"]["labels"]
    return str(meta["job_type"]), str(meta["task_index"])


def alive(pod: dict[str, Any]) -> bool:
    return pod["status"].get("phase") not in ("Succeeded", "Failed")


@pytest.fixture(autouse=True)
def _no_in_cluster_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def test_a_never_worker_exiting_1_fails_the_dist_job_in_one_sync_and_stops_the_rest(
    node_cluster: RealCluster, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files={f"jobs/{NAME}.yaml": dist_job()})
    cache = tmp_path / "cache"
    cli("sync", *sync_args(remote, node_cluster, cache))

    def worker_1_failed_and_rest_waiting() -> list[dict[str, Any]] | None:
        pods = pods_of(node_cluster, NAME)
        failed = [p for p in pods if p["status"].get("phase") == "Failed"]
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        return pods if len(failed) == 1 and len(running) == 5 else None

    pods = wait_for("worker 1 to fail, the rest running", worker_1_failed_and_rest_waiting, 180)
    (failed,) = [p for p in pods if p["status"].get("phase") == "Failed"]
    assert labels(failed) == ("WORKER", "1"), failed["metadata"]

    def worker_1_batch_job_failed() -> bool:
        for job in node_cluster.objects("jobs", NS):
            if job["metadata"]["name"] == failed["metadata"]["labels"]["job-name"]:
                conditions = job.get("status", {}).get("conditions") or []
                return any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)
        return False

    wait_for("the job controller to fail worker 1's batch Job", worker_1_batch_job_failed)

    # One sync after the failure: Failed, and the replicas still running are stopped.
    cli("sync", *sync_args(remote, node_cluster, cache))
    state = job_state(remote, cache, NAME)
    assert state["state"] == "Failed", state
    assert (state["failure"]["replica"], state["failure"]["exit_code"]) == ("WORKER 1", 1), state
    assert "no data shard" in state["failure"]["log"], state

    wait_for(
        "the job's other replicas to stop",
        lambda: not [p for p in pods_of(node_cluster, NAME) if alive(p)],
        timeout=90,
    )
    left = pods_of(node_cluster, NAME)
    # Not retried: worker 1 had one pod, the failed one, and nothing started after it.
    assert [p["metadata"]["uid"] for p in left if labels(p) == ("WORKER", "1")] == [
        failed["metadata"]["uid"]
    ], left
    assert not [p for p in left if alive(p)], left

    # A later sync leaves the finished job alone: nothing runs again.
    cli("sync", *sync_args(remote, node_cluster, cache))
    assert job_state(remote, cache, NAME)["state"] == "Failed"
    assert not [p for p in pods_of(node_cluster, NAME) if alive(p)]
