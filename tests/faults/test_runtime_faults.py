"""containerd restarted and a pod preempted under a dist job, on the real node (issue 30).

containerd killed by its pid (SIGKILL) and started again: the containers do not
depend on it (their shims hold them), so the job stays `Running`, its pods the same,
none restarted, and a sync while containerd is down writes nothing. A pod of the job
preempted by the scheduler for a pod of a higher PriorityClass (the node has room
for only one of them): the job is never `Failed`,
nothing is counted against `backoffLimit: 0`, the row says which replica was
preempted, and the job runs again whole once the higher pod is done.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.images import TOOLBOX_IMAGE
from tests.controlplane.node import NODE_NAME
from tests.faults.conftest import FaultCluster
from tests.faults.test_node_faults import (
    PODS,
    batch_jobs,
    dist_job,
    node_runs_a_pod,
    noted,
    running,
    running_tasks,
    start,
    synced,
    uids,
)
from tests.gitfixtures import GitRemote
from tests.helpers.node_training import NS

HIGH = "mxgitops-fault-high"


def task_pids(faults: FaultCluster) -> set[int]:
    """The host pids of the containers containerd runs (``ctr tasks ls``)."""
    lines = faults.node.ctr("tasks", "ls").splitlines()[1:]
    return {int(line.split()[1]) for line in lines if line.split()[-1] == "RUNNING"}


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def test_containerd_restarted_leaves_a_running_dist_job_running(
    faults: FaultCluster, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files={"jobs/steady.yaml": dist_job("steady", "Never")})
    cache = tmp_path / "cache"
    before = start(faults, remote, cache, "steady")
    containers, pids = running_tasks(faults), task_pids(faults)

    stopped = time.monotonic()
    faults.node.kill("containerd")  # SIGKILL; a clean stop (SIGTERM) did the same
    try:
        assert all(alive(pid) for pid in pids), pids  # the shims keep the containers
        row = synced(remote, faults, cache, "steady")  # exit 0, asserted by cli
        assert (row["state"], row["action"]) == ("Running", "unchanged"), row
    finally:
        faults.node.start_again("containerd")

    assert containers <= running_tasks(faults)  # the new containerd found them again
    after = wait_for("the same pods running", lambda: running(faults.cluster, "steady"), 60)
    recovered = time.monotonic() - stopped
    assert uids(after) == uids(before)  # not restarted, not replaced
    restarts = [c.get("restartCount", 0) for p in after for c in p["status"]["containerStatuses"]]
    assert restarts == [0] * PODS, restarts
    row = synced(remote, faults, cache, "steady")
    assert (row["state"], row["action"]) == ("Running", "unchanged"), row
    assert noted(remote, cache, "steady")["state"] == "Running"
    jobs = batch_jobs(faults.cluster, "steady")
    assert len(jobs) == PODS and not any(j["status"].get("failed") for j in jobs), jobs
    print(f"\ncontainerd killed: Running throughout, the same pods back in {recovered:.1f} s")
    node_runs_a_pod(faults)


# -- preemption ---------------------------------------------------------------------


def allocatable_millicpu(cluster: RealCluster) -> int:
    cpu = str(cluster.rest.get(f"/api/v1/nodes/{NODE_NAME}")["status"]["allocatable"]["cpu"])
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


def sized_job(cluster: RealCluster, name: str) -> str:
    """A dist job (`Never`, `backoffLimit: 0`) whose 4 pods take 60 % of the node's CPU."""
    doc = yaml.safe_load(dist_job(name, "Never", backoffLimit=0))
    share = f"{allocatable_millicpu(cluster) * 15 // 100}m"
    for role in doc["spec"]["mxReplicaSpecs"].values():
        (container,) = role["template"]["spec"]["containers"]
        container["resources"]["requests"]["cpu"] = share
    return yaml.safe_dump(doc)


@pytest.fixture
def high_priority(faults: FaultCluster) -> Iterator[str]:
    """A PriorityClass above every job's (none names one: priority 0)."""
    path = "/apis/scheduling.k8s.io/v1/priorityclasses"
    faults.cluster.rest.create(
        path,
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": HIGH},
            "value": 1000000,
        },
    )
    yield HIGH
    faults.cluster.raw("DELETE", f"{path}/{HIGH}")


def preemptor(cluster: RealCluster) -> dict[str, Any]:
    """A pod of the higher priority that needs half the node: it fits only once a pod of
    the job is preempted. It runs a moment and ends, giving the node back."""
    cpu = f"{allocatable_millicpu(cluster) // 2}m"
    container = {
        "name": "c",
        "image": TOOLBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", "sleep 1"],
        "resources": {"requests": {"cpu": cpu}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "preemptor", "namespace": NS},
        "spec": {
            "priorityClassName": HIGH,
            "restartPolicy": "Never",
            "containers": [container],
            "terminationGracePeriodSeconds": 1,
        },
    }


def preempt(cluster: RealCluster) -> None:
    """Create the higher pod and wait until it ran (so a pod of the job was preempted)."""
    cluster.create(preemptor(cluster), NS)
    wait_for(
        "the preemptor to run and end",
        lambda: (
            (cluster.get("Pod", "preemptor", NS) or {}).get("status", {}).get("phase")
            == "Succeeded"
        ),
        90,
    )


@pytest.mark.timeout(180)
def test_a_preempted_dist_job_runs_again_whole_never_failed_never_counted(
    faults: FaultCluster,
    high_priority: str,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
) -> None:
    name = "preempted"
    manifest = sized_job(faults.cluster, name)
    remote = make_git_remote("jobs", files={f"jobs/{name}.yaml": manifest})
    cache = tmp_path / "cache"
    before = start(faults, remote, cache, name)

    preempted = time.monotonic()
    preempt(faults.cluster)
    row = synced(remote, faults, cache, name)
    assert row["state"] != "Failed", row
    assert row["action"] == "replace", row
    assert row["reason"].startswith("disrupted, not failed: "), row
    assert f"preempted on node {NODE_NAME} (PreemptionByScheduler: " in row["reason"], row
    assert "not counted against backoffLimit" in row["reason"], row
    after = wait_for("the job running again whole", lambda: running(faults.cluster, name), 90)
    recovered = time.monotonic() - preempted
    assert not uids(after) & uids(before)  # every replica is new

    row = synced(remote, faults, cache, name)
    assert (row["state"], row["action"]) == ("Running", "unchanged"), row
    assert noted(remote, cache, name)["state"] == "Running"
    jobs = batch_jobs(faults.cluster, name)
    assert len(jobs) == PODS, [j["metadata"]["name"] for j in jobs]  # no duplicate
    assert all(not j.get("status", {}).get("failed") for j in jobs), jobs  # nothing counted
    print(f"\npreempted (batch): running again whole {recovered:.1f} s after the preemptor")
