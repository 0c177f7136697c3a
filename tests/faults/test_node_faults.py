"""Faults of the node while a dist job runs, on the real node (issue 30).

What a user asks after each: does my job end in the right state, exactly once, with a
true message? Each test injects one fault into the real processes (the kubelet killed
by its pid; the node's network cut until the node goes NotReady and its pods are
evicted), runs the syncs a CronJob would, and checks: the job is never Failed for what
Kubernetes did, no object is duplicated, nothing is counted against backoffLimit, the
note says what happened, the exit code is 0; then it restores the node and proves it
runs a new pod. Each prints its measured recovery time (fault to converged), the
figures of ``docs/concepts/faults.md``.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.node import NODE_NAME
from tests.faults.conftest import FaultCluster
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.faults import (
    MXGITOPS,
    NODE_LOST_TIMEOUT,
    PODS,
    batch_jobs,
    dist_job,
    node_ready,
    node_runs_a_pod,
    noted,
    running,
    running_tasks,
    start,
    synced,
    uids,
)
from tests.helpers.node import cli, pods_of, sync_args


@pytest.fixture(autouse=True)
def _no_in_cluster_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def test_the_kubelet_killed_by_pid_leaves_a_running_dist_job_running(
    faults: FaultCluster, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files={"jobs/steady.yaml": dist_job("steady", "Never")})
    cache = tmp_path / "cache"
    before = start(faults, remote, cache, "steady")
    containers = {
        c["containerID"].removeprefix("containerd://")
        for p in before
        for c in p["status"]["containerStatuses"]
    }

    killed = time.monotonic()
    faults.node.kill("kubelet")
    try:
        # The containers do not depend on the kubelet: containerd's shims keep them running.
        assert containers <= running_tasks(faults), faults.node.ctr("tasks", "ls")
        row = synced(remote, faults, cache, "steady")  # exit 0, asserted by cli
        assert (row["state"], row["action"]) == ("Running", "unchanged"), row
    finally:
        faults.node.start_again("kubelet")

    after = wait_for("the same pods running", lambda: running(faults.cluster, "steady"), 60)
    recovered = time.monotonic() - killed
    assert uids(after) == uids(before)  # not restarted, not replaced
    restarts = [
        c.get("restartCount", 0) for p in after for c in p["status"].get("containerStatuses", [])
    ]
    assert restarts == [0] * PODS, restarts
    row = synced(remote, faults, cache, "steady")
    assert (row["state"], row["action"]) == ("Running", "unchanged"), row
    assert noted(remote, cache, "steady")["state"] == "Running"  # the note
    assert len(batch_jobs(faults.cluster, "steady")) == PODS
    print(f"\nkubelet killed: Running throughout; kubelet back and pods read in {recovered:.1f} s")
    node_runs_a_pod(faults)


def sync_in_background(
    remote: GitRemote, faults: FaultCluster, cache: Path
) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    return subprocess.Popen(
        [str(MXGITOPS), "sync", *sync_args(remote, faults.cluster, cache)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def disrupted(cluster: RealCluster, name: str) -> list[dict[str, Any]] | None:
    """The job's pods the taint manager is evicting (DisruptionTarget), if any."""
    pods = [
        p
        for p in pods_of(cluster, name)
        if any(c["type"] == "DisruptionTarget" for c in p["status"].get("conditions") or [])
    ]
    return pods or None


@pytest.mark.timeout(NODE_LOST_TIMEOUT)
@pytest.mark.parametrize("restart", ["Never", "OnFailure"])
def test_a_node_lost_runs_the_dist_job_again_whole_never_failed_never_counted(
    faults: FaultCluster, make_git_remote: Callable[..., GitRemote], tmp_path: Path, restart: str
) -> None:
    """The node's network cut until it goes NotReady and the taint manager evicts its
    pods: the job is not Failed (backoffLimit 0 does not count it), the sync says
    which replica was evicted and why, replaces every replica once the old pods are
    gone (the node back), and the job runs again whole: one batch Job per replica."""
    name = f"lost-{restart.lower()}"
    manifest = dist_job(name, restart, backoffLimit=0)
    remote = make_git_remote("jobs", files={f"jobs/{name}.yaml": manifest})
    cache = tmp_path / "cache"
    before = start(faults, remote, cache, name)

    cut = time.monotonic()
    faults.node.network.cut()
    try:
        wait_for("the node NotReady", lambda: not node_ready(faults.cluster), 90)
        not_ready = time.monotonic() - cut
        wait_for("the taint manager to evict the pods", lambda: disrupted(faults.cluster, name), 60)
        evicted = time.monotonic() - cut
        dry = cli("sync", "--dry-run", *sync_args(remote, faults.cluster, cache))
        assert "disrupted, not failed" in dry, dry
        sync = sync_in_background(remote, faults, cache)
        wait_for(
            "the sync to delete every replica",
            lambda: (
                all(
                    j["metadata"].get("deletionTimestamp") for j in batch_jobs(faults.cluster, name)
                )
                or None
            ),
            60,
        )
    finally:
        faults.node.network.restore()
    wait_for("the node Ready again", lambda: node_ready(faults.cluster), 90)
    output, _ = sync.communicate(timeout=180)
    assert sync.returncode == 0, output
    after = wait_for("the job running again whole", lambda: running(faults.cluster, name), 120)
    recovered = time.monotonic() - cut
    assert not uids(after) & uids(before)  # every replica is new

    state = noted(remote, cache, name)
    assert state["state"] != "Failed", state
    assert state["action"] == "replace", state
    assert state["reason"].startswith("disrupted, not failed: "), state
    assert f"evicted: node {NODE_NAME} NotReady or unreachable" in state["reason"], state
    assert "not counted against backoffLimit" in state["reason"], state

    row = synced(remote, faults, cache, name)
    assert (row["state"], row["action"]) == ("Running", "unchanged"), row
    jobs = batch_jobs(faults.cluster, name)
    assert len(jobs) == PODS, [j["metadata"]["name"] for j in jobs]  # no duplicate
    assert all(not j.get("status", {}).get("failed") for j in jobs), jobs  # nothing counted
    print(
        f"\nnode lost ({restart}): NotReady after {not_ready:.1f} s, evicted after "
        f"{evicted:.1f} s, running again whole {recovered:.1f} s after the cut"
    )
    node_runs_a_pod(faults)
