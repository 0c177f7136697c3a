"""Where Kueue runs a queued JobSet when it runs it on another cluster, and its state as
that cluster reports it: pure.

Kueue's MultiKueue (a manager cluster's AdmissionCheck of controller
`kueue.x-k8s.io/multikueue`) copies a queued JobSet to a worker cluster once a worker
admits its Workload, and mirrors the worker's JobSet status back onto the manager's;
the manager's Workload names the worker (`status.clusterName`). The pods, their logs
and their events stay on the worker: the manager, where mxgitops reads and writes, has
none. So where a job's Workload names a cluster, its replicas' states are read from its
JobSet's mirrored `replicatedJobsStatus` (per role, the child Jobs active, ready,
succeeded, failed) instead of from pods, and a failure says why it has no log.

To mxgitops this is Kueue's configuration, not a runtime: it reads the same JobSet and
Workload on the one cluster it syncs, and names the cluster where Kueue says one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mxgitops.model import ReplicaType
from mxgitops.runtimes.shared.failure import MAX_MESSAGE
from mxgitops.runtimes.shared.state import MxReplicaStatus, ReplicaState, aggregate


def cluster_of(workload: Mapping[str, Any] | None) -> str:
    """The cluster Kueue admitted the Workload on, if another: `status.clusterName`."""
    return str(((workload or {}).get("status") or {}).get("clusterName") or "")


def admission_wait(workload: Mapping[str, Any]) -> str:
    """Why a Workload that holds quota still waits: its admission checks not yet Ready,
    in Kueue's words (`multikueue: Pending: ...`), and the clusters it was sent to."""
    status = workload.get("status") or {}
    waits = [
        ": ".join(str(part) for part in (c.get("name"), c.get("state"), c.get("message")) if part)
        for c in status.get("admissionChecks") or []
        if c.get("state") != "Ready"
    ]
    # Sorted: Kueue's order changes between reads, and an unchanged wait must read the
    # same (a note rewritten on every sync for nothing).
    nominated = sorted(str(n) for n in status.get("nominatedClusterNames") or [])
    if nominated:
        waits.append(
            f"sent to cluster {', '.join(nominated)}, admitted by none yet (why is said "
            "on each of them, by its own Workload: this cluster's does not carry it)"
        )
    if not waits:
        return ""
    return _said("quota reserved; waiting for admission check " + "; ".join(waits))


def mirrored_replicas(
    jobset: Mapping[str, Any], counts: Mapping[ReplicaType, int]
) -> list[MxReplicaStatus]:
    """Each replica set's state from the JobSet's mirrored status: one child Job per
    role (`render.py`), which failed, succeeded, or is ready (all its pods ready or
    done: Running); else Pending (a Job's active pods include those not started)."""
    by_role = {
        str(s.get("name")): s
        for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or []
    }
    statuses = []
    for replica_type, count in counts.items():
        role = by_role.get(replica_type.role) or {}
        if int(role.get("failed") or 0):
            state = ReplicaState.FAILED
        elif int(role.get("succeeded") or 0):
            state = ReplicaState.SUCCEEDED
        elif int(role.get("ready") or 0):
            state = ReplicaState.RUNNING
        else:
            state = ReplicaState.PENDING
        statuses.append(aggregate(replica_type, count, [state] * count))
    return statuses


def failed_role(jobset: Mapping[str, Any], counts: Mapping[ReplicaType, int]) -> str:
    """The replica type whose child Job failed, as the mirrored status says ("JobSet" if
    none does)."""
    for status in mirrored_replicas(jobset, counts):
        if status.state is ReplicaState.FAILED:
            return str(status.type)
    return "JobSet"


def unreachable(cluster: str, clusters: Sequence[Mapping[str, Any]]) -> str:
    """Why the state of a job on `cluster` may be stale: the manager's MultiKueueCluster
    for it is not Active (its API server does not answer). Until Kueue's
    workerLostTimeout the manager keeps the JobSet's last mirrored status; then Kueue
    dispatches the job again, to run from the start. "" while it is reachable, or where
    mxgitops could not read the MultiKueueClusters."""
    found = next((c for c in clusters if (c.get("metadata") or {}).get("name") == cluster), None)
    conditions = ((found or {}).get("status") or {}).get("conditions") or []
    active = next((c for c in conditions if c.get("type") == "Active"), None)
    if active is None or active.get("status") != "False":
        return ""
    since = active.get("lastTransitionTime") or "an unknown time"
    why = f" ({active['reason']})" if active.get("reason") else ""
    return _said(
        f"cluster {cluster} is unreachable since {since}{why}: the state shown is the last "
        "it reported; Kueue dispatches the job again after its workerLostTimeout, and it "
        "then runs again from the start"
    )


def no_log_here(cluster: str) -> str:
    """A remote failure's log field: why the manager has none."""
    return (
        f"log unavailable: its pods ran on cluster {cluster}; the cluster mxgitops syncs "
        "has none (Kueue's MultiKueue carries back the JobSet's status, not its pods, "
        "logs or events): read them there"
    )


def _said(text: str) -> str:
    return " ".join(text.split())[:MAX_MESSAGE]
