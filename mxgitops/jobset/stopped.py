"""A queued gang that Kueue stopped after some of its replicas finished. Pure.

Kueue preempts or evicts a gang by suspending its JobSet; JobSet suspends the child
Jobs, whose running pods go, and resumes them once Kueue readmits the gang. An
Indexed Job keeps its completed indexes through that: a worker that had finished is
not run again, and the others, with a new scheduler and new servers, wait for it for
ever (a ps-lite job needs every one of its replicas). JobSet v0.11 and Kueue v0.17
leave it so (kubernetes-sigs/jobset#1208, kubernetes-sigs/kueue#10487, both open).

So such a JobSet is a disruption (`LiveJobSet.disruption`) that the planner runs
again whole, as it does a batch-runtime dist job a pod of which was taken away: the
JobSet made anew, queued again as Kueue requeues a preempted gang, nothing counted
against backoffLimit. Seen while the gang is stopped, or, if Kueue readmitted it
before a sync looked, once it runs again: a pod of the run made after another had
finished (a run never stopped makes every pod before any of them finishes).

Every other disruption the JobSet controller restarts whole itself, uncounted by its
`maxRestarts` but counted in its status (`disruption_restarts`), which
`--max-disruption-runs` bounds as it bounds the planner's re-runs (`runtime/reruns.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mxgitops import objects
from mxgitops.jobset.failure import COMPLETION_INDEX_LABEL, JOBSET_NAME_LABEL
from mxgitops.objects import KubeObject
from mxgitops.runtime.disruption import Disruption
from mxgitops.runtime.labels import JOB_TYPE_LABEL, REPLICA_TYPES
from mxgitops.runtime.reruns import MAX_DISRUPTION_RUNS

# JobSet's label of the run (status.restarts) a child Job and its pods belong to.
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"


def stopped_after_finishing(
    jobset: Mapping[str, Any], pods: Sequence[KubeObject]
) -> Disruption | None:
    """Why `jobset`, a queued gang not finished, cannot finish as it is: a replica of
    its current run finished before Kueue stopped it. None if no replica did."""
    run = current_run(jobset, pods)
    finished = [p for p in run if (p.get("status") or {}).get("phase") == "Succeeded"]
    if not finished:
        return None
    first = min(finished, key=_finished_at)
    replica = _replica(first)
    if (jobset.get("spec") or {}).get("suspend"):
        return Disruption(
            replica,
            "finished before Kueue stopped the gang: resumed, the others would wait for it "
            "for ever",
        )
    if any(_created(p) > _finished_at(first) for p in run):
        return Disruption(
            replica,
            "finished, and pods of the run were made after it (the gang was stopped and "
            "started again): they wait for it for ever",
        )
    return None


def disruption_restarts(jobset: Mapping[str, Any]) -> tuple[str, ...]:
    """One entry per restart of the gang its disruption rule made (`render.py`'s
    `RestartJobSetAndIgnoreMaxRestarts`): `status.restarts` less those that count
    towards `maxRestarts` (`restartsCountTowardsMax`). The JobSet says how many, not how
    each went."""
    status = jobset.get("status") or {}
    restarts = _count(status.get("restarts")) - _count(status.get("restartsCountTowardsMax"))
    restarted = "restarted whole by the JobSet controller after a disruption"
    return (restarted,) * min(max(restarts, 0), MAX_DISRUPTION_RUNS)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def current_run(jobset: Mapping[str, Any], pods: Iterable[KubeObject]) -> list[KubeObject]:
    """The pods of the JobSet's current run: its own (not those of a JobSet of that name
    it replaced, still being collected), of its latest restart."""
    metadata = jobset.get("metadata") or {}
    attempt = str((jobset.get("status") or {}).get("restarts") or 0)
    return [
        pod
        for pod in pods
        if objects.labels_of(pod).get(JOBSET_NAME_LABEL) == metadata.get("name")
        and objects.labels_of(pod).get(RESTART_ATTEMPT_LABEL, attempt) == attempt
        and _created(pod) >= str(metadata.get("creationTimestamp") or "")
    ]


def _created(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("creationTimestamp") or "")


def _finished_at(pod: Mapping[str, Any]) -> str:
    """When its last container ended (RFC 3339, so the strings sort by time)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    ended = [
        str(((s.get("state") or {}).get("terminated") or {}).get("finishedAt") or "")
        for s in statuses
    ]
    return max(ended, default="") or _created(pod)


def _replica(pod: Mapping[str, Any]) -> str:
    """`WORKER 0`, from its labels; its pod's name if a hand moved them."""
    labels = objects.labels_of(pod)
    replica_type = REPLICA_TYPES.get(labels.get(JOB_TYPE_LABEL, ""))
    index = labels.get(COMPLETION_INDEX_LABEL, "")
    if replica_type is None or not index.isdigit():
        return f"pod {(pod.get('metadata') or {}).get('name')}"
    return f"{replica_type} {index}"
