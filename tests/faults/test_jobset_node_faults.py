"""The kubelet killed and a pod preempted under a JobSet gang, on the real node with the
real JobSet controller (issue 30; the batch runtime's cases are in
``test_node_faults.py`` and ``test_runtime_faults.py``).

The kubelet killed by its pid while the gang trains: its containers keep running, the
job stays `Running`, the same pods, none restarted. A pod of the gang preempted by the
scheduler for a pod of a higher PriorityClass: its child Job fails on the disruption
(its rule on `DisruptionTarget`) and the JobSet restarts the whole gang without
counting it (`RestartJobSetAndIgnoreMaxRestarts`): with `backoffLimit: 0` the job is
not `Failed`, and mxgitops writes nothing for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane.harness import wait_for
from tests.ecosystem.fixtures import Ecosystem
from tests.faults.conftest import FaultCluster
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.faults import (
    PODS,
    dist_job,
    fault_jobset,
    gang_running,
    high_priority,
    node_runs_a_pod,
    preempt,
    row_of,
    running_tasks,
    sized_job,
    the_jobset,
)
from tests.helpers.node import NS, cli, sync_args

__all__ = ["fault_jobset", "high_priority"]  # fixtures, shared with their modules
JOBSETS = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NS}/jobsets"


@pytest.fixture(autouse=True)
def _jobsets_removed(fault_jobset: Ecosystem) -> Iterator[None]:
    """The JobSets go after each test, while their controller runs (it would make the
    child Jobs the next test's wipe deletes again)."""
    yield
    for jobset in fault_jobset.jobsets(NS):
        path = (
            f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NS}/jobsets/{jobset['metadata']['name']}"
        )
        fault_jobset.rest.delete(path, {"propagationPolicy": "Foreground"})
    wait_for("the JobSets gone", lambda: not fault_jobset.jobsets(NS), 60)


def started(
    faults: FaultCluster, eco: Ecosystem, remote: GitRemote, cache: Path, name: str
) -> tuple[list[str], str, list[dict[str, Any]]]:
    """The sync's arguments, and the job's JobSet and pods once its gang runs."""
    args = [*sync_args(remote, faults.cluster, cache), "--default-runtime", "jobset"]
    cli("sync", *args)
    jobset = the_jobset(eco, name)["metadata"]["name"]
    return args, jobset, wait_for("the gang running", lambda: gang_running(eco, jobset), 120)


def unchanged(args: list[str], name: str) -> None:
    row = row_of(cli("sync", "-o", "json", *args), name)
    assert (row["state"], row["action"]) == ("Running", "unchanged"), row


def uids(pods: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["uid"] for p in pods}


def test_the_kubelet_killed_leaves_a_running_jobset_gang_running(
    faults: FaultCluster,
    fault_jobset: Ecosystem,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
) -> None:
    remote = make_git_remote("jobs", files={"jobs/gang.yaml": dist_job("gang", "Never")})
    args, jobset, before = started(faults, fault_jobset, remote, tmp_path / "cache", "gang")
    containers = running_tasks(faults)

    killed = time.monotonic()
    faults.node.kill("kubelet")
    try:
        assert containers <= running_tasks(faults)  # containerd's shims keep them
        unchanged(args, "gang")
    finally:
        faults.node.start_again("kubelet")

    after = wait_for("the same gang running", lambda: gang_running(fault_jobset, jobset), 60)
    recovered = time.monotonic() - killed
    assert uids(after) == uids(before)
    restarts = [c.get("restartCount", 0) for p in after for c in p["status"]["containerStatuses"]]
    assert restarts == [0] * PODS, restarts
    assert (the_jobset(fault_jobset, "gang").get("status") or {}).get("restarts", 0) == 0
    unchanged(args, "gang")
    assert len(fault_jobset.jobsets(NS)) == 1
    print(f"\nkubelet killed (JobSet): Running throughout; the same gang read in {recovered:.1f} s")
    node_runs_a_pod(faults)


def test_a_preempted_jobset_gang_restarts_whole_uncounted(
    faults: FaultCluster,
    fault_jobset: Ecosystem,
    high_priority: str,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
) -> None:
    name = "preempted-gang"
    remote = make_git_remote("jobs", files={f"jobs/{name}.yaml": sized_job(faults.cluster, name)})
    args, jobset, before = started(faults, fault_jobset, remote, tmp_path / "cache", name)

    preempted = time.monotonic()
    preempt(faults.cluster)

    def new_gang() -> list[dict[str, Any]] | None:
        pods = gang_running(fault_jobset, jobset)
        return pods if pods and not uids(pods) & uids(before) else None  # the whole gang new

    wait_for("a new gang running", new_gang, 90)
    recovered = time.monotonic() - preempted
    status = the_jobset(fault_jobset, name).get("status") or {}
    assert status.get("restarts", 0) == 1, status
    assert status.get("restartsCountTowardsMax", 0) == 0, status  # not counted
    unchanged(args, name)
    assert len(fault_jobset.jobsets(NS)) == 1
    print(f"\npreempted (JobSet): the gang running again {recovered:.1f} s after the preemptor")
