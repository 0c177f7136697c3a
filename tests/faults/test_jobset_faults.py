"""A node lost under a dist job on the JobSet runtime, on the real node with the real
JobSet controller (issue 30).

The JobSet's child Jobs fail on a pod Kubernetes took away (their pod failure policy's
rule on `DisruptionTarget`), and the JobSet's first failure rule restarts the whole
gang without counting it (`RestartJobSetAndIgnoreMaxRestarts`): with
`backoffLimit: 0` (`maxRestarts: 0`) the job is not Failed, runs again whole, and
mxgitops writes nothing for it (the JobSet is the runtime's own).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.controlplane.harness import wait_for
from tests.ecosystem.fixtures import Ecosystem
from tests.faults.conftest import FaultCluster
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.faults import (
    NODE_LOST_TIMEOUT,
    dist_job,
    fault_jobset,
    gang_running,
    node_ready,
    node_runs_a_pod,
    row_of,
    the_jobset,
)
from tests.helpers.node import NS, cli, sync_args

__all__ = ["fault_jobset"]  # fixtures from tests/helpers, used here


@pytest.fixture(autouse=True)
def _no_in_cluster_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.mark.timeout(NODE_LOST_TIMEOUT)
def test_a_node_lost_restarts_the_jobset_gang_uncounted(
    faults: FaultCluster,
    fault_jobset: Ecosystem,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
) -> None:
    name = "lost-gang"
    remote = make_git_remote(
        "jobs", files={f"jobs/{name}.yaml": dist_job(name, "Never", backoffLimit=0)}
    )
    cache = tmp_path / "cache"
    args = [*sync_args(remote, faults.cluster, cache), "--default-runtime", "jobset"]
    cli("sync", *args)
    jobset = the_jobset(fault_jobset, name)["metadata"]["name"]
    before = wait_for("the gang running", lambda: gang_running(fault_jobset, jobset), 120)

    cut = time.monotonic()
    faults.node.network.cut()
    try:
        wait_for("the node NotReady", lambda: not node_ready(faults.cluster), 90)
        wait_for(
            "the taint manager to evict the pods",
            lambda: (
                [
                    p
                    for p in fault_jobset.pods(jobset, NS)
                    if any(
                        c["type"] == "DisruptionTarget" for c in p["status"].get("conditions") or []
                    )
                ]
                or None
            ),
            60,
        )
        row = row_of(cli("sync", "-o", "json", *args), name)
        assert row["state"] != "Failed", row
    finally:
        faults.node.network.restore()
    wait_for("the node Ready again", lambda: node_ready(faults.cluster), 90)
    after = wait_for("the gang running again", lambda: gang_running(fault_jobset, jobset), 180)
    recovered = time.monotonic() - cut
    assert not {p["metadata"]["uid"] for p in after} & {p["metadata"]["uid"] for p in before}
    status = the_jobset(fault_jobset, name).get("status") or {}
    assert status.get("restarts", 0) >= 1, status
    assert status.get("restartsCountTowardsMax", 0) == 0, status  # not counted
    row = row_of(cli("sync", "-o", "json", *args), name)
    assert (row["state"], row["action"]) == ("Running", "unchanged"), row
    assert len(fault_jobset.jobsets(NS)) == 1
    print(f"\nnode lost (JobSet, Never): the gang running again {recovered:.1f} s after the cut")
    node_runs_a_pod(faults)
