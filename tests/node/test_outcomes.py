"""How a job ends, as the real node reports it: a local job that trains and succeeds
(the shared recorded run's ``loop``),
a worker that exits 1 (Failed, with the container's real exit code, the batch Job's
condition and the tail of the real container's log), and a container over its
memory limit (killed by the kernel's memory cgroup: ``OOMKilled``).

Each job is synced by ``mxgitops sync`` from a jobs repository, run by the real
job controller and the real kubelet, and read back by a second sync into the note,
which ``mxgitops status`` shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.node import (
    NS,
    RESULT,
    cli,
    job_state,
    pods_of,
    replica,
    sync_args,
)
from tests.helpers.recordedrun import LOOP, RecordedTraining

FINISH_TIMEOUT = 180.0


def kubeflow_worker(name: str, command: list[str], **resources: Any) -> str:
    """A one-worker ``kubeflow.org/v1`` job: ``restartPolicy: ExitCode`` (exit codes
    1-127 fail it at once, through the batch Job's pod failure policy) and
    ``backoffLimit: 0`` (a signal, such as the OOM killer's, is not retried)."""
    container = replica("WORKER", 1)["template"]["spec"]["containers"][0]
    container["command"] = command
    if resources:
        container["resources"] = resources
    return yaml.safe_dump(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MXJob",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "runPolicy": {"backoffLimit": 0},
                "mxReplicaSpecs": {
                    "Worker": {
                        "replicas": 1,
                        "restartPolicy": "ExitCode",
                        "template": {"spec": {"containers": [container]}},
                    }
                },
            },
        }
    )


def run_to_end(
    cluster: RealCluster,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
    name: str,
    job: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Sync the job, wait for its pod to end and the job controller to decide, sync
    again: its pod and its state as ``mxgitops status`` reads it from the note."""
    remote = make_git_remote("jobs", files={f"jobs/{name}.yaml": job})
    cache = tmp_path / "cache"
    cli("sync", *sync_args(remote, cluster, cache))

    def ended() -> dict[str, Any] | None:
        pods = [
            p for p in pods_of(cluster, name) if p["status"].get("phase") in ("Succeeded", "Failed")
        ]
        return pods[0] if pods else None

    pod = wait_for(f"{name}'s pod to end", ended, timeout=FINISH_TIMEOUT)
    wait_for(f"the job controller to count {name}'s pod", lambda: _job_finished(cluster, name))
    cli("sync", *sync_args(remote, cluster, cache))
    return pod, job_state(remote, cache, name)


def _job_finished(cluster: RealCluster, name: str) -> bool:
    for job in cluster.objects("jobs", NS):
        if job["metadata"]["name"].startswith(f"{name}-"):
            conditions = job.get("status", {}).get("conditions") or []
            return any(
                c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions
            )
    return False


def terminated(pod: dict[str, Any]) -> dict[str, Any]:
    (status,) = [s for s in pod["status"]["containerStatuses"] if s["name"] == "mxnet"]
    return dict(status["state"]["terminated"])


@pytest.fixture(autouse=True)
def _no_in_cluster_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def test_a_local_job_trains_and_succeeds(recorded_training: RecordedTraining) -> None:
    """``loop`` of the shared recorded run: ``train.py`` alone, a ``local`` kvstore."""
    run = recorded_training.loop_first
    (pod,) = run.pods
    assert terminated(pod)["exitCode"] == 0
    (line,) = [x for x in run.worker0_log.splitlines() if x.startswith(RESULT)]
    result = json.loads(line.removeprefix(RESULT))
    assert result["kvstore"] == "local" and result["loss_after"] < result["loss_before"] / 100
    (state,) = [j for j in recorded_training.after_first["jobs"] if j["name"] == LOOP]
    assert state["state"] == "Succeeded", state


def test_a_worker_exiting_1_fails_the_job_with_its_exit_code_and_log(
    node_cluster: RealCluster, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    # One stream: stdout and stderr reach the log through two pipes, in arrival order.
    script = "echo epoch 1; echo epoch 2; echo 'loss is NaN'; exit 1"
    pod, state = run_to_end(
        node_cluster,
        make_git_remote,
        tmp_path,
        "nan-loss",
        kubeflow_worker("nan-loss", ["sh", "-c", script]),
    )
    assert terminated(pod)["exitCode"] == 1
    assert state["state"] == "Failed", state
    failure = state["failure"]
    assert (failure["replica"], failure["exit_code"]) == ("WORKER 0", 1), failure
    assert failure["log"].endswith("loss is NaN\n"), failure
    assert "epoch 2" in failure["log"], failure
    assert "PodFailurePolicy" in failure["reason"], failure  # the batch Job's condition


def test_a_container_over_its_memory_limit_is_oom_killed_by_the_kernel(
    node_cluster: RealCluster, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    hog = "import sys; print('allocating', flush=True); b = b'x' * (512 << 20); sys.exit(0)"
    memory = {"requests": {"memory": "64Mi"}, "limits": {"memory": "64Mi"}}
    pod, state = run_to_end(
        node_cluster,
        make_git_remote,
        tmp_path,
        "memory-hog",
        kubeflow_worker("memory-hog", ["python3", "-c", hog], **memory),
    )
    ended = terminated(pod)
    assert (ended["reason"], ended["exitCode"]) == ("OOMKilled", 137), ended
    assert state["state"] == "Failed", state
    failure = state["failure"]
    assert (failure["exit_code"], failure["replica"]) == (137, "WORKER 0"), failure
    assert "OOMKilled" in failure["reason"], failure
    assert "BackoffLimitExceeded" in failure["reason"], failure
