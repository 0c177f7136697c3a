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
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.controlplane.harness import wait_for
from tests.controlplane.node import NODE_NAME
from tests.faults.conftest import FaultCluster
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.faults import (
    PODS,
    batch_jobs,
    dist_job,
    high_priority,
    node_runs_a_pod,
    noted,
    preempt,
    running,
    running_tasks,
    sized_job,
    start,
    synced,
    uids,
)

__all__ = ["high_priority"]  # fixtures from tests/helpers, used here


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
