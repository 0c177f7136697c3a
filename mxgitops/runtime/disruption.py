"""A disruption is not a failure: pods Kubernetes took away, told from the program's
failures. Pure.

Kubernetes marks a pod it takes away with the `DisruptionTarget` condition: the
taint manager evicting it from a node gone NotReady or unreachable, the kubelet
evicting it under node pressure, the scheduler preempting it, the Eviction API
(a drain), PodGC once its node is gone. None of these is the user's bug.

Kubeflow's training operator v1.8.1 did not tell them apart: under `Never` and
`OnFailure` a pod so failed failed the job, and under `ExitCode` (and whenever a
pod was deleted outright) it made the one replica a new pod, which cannot rejoin a
running ps-lite job: the job hangs. mxgitops runs a disrupted job again whole, and
never counts it against backoffLimit, not even `backoffLimit: 0`:

- a local job (one worker): its batch Job ignores the disrupted pod (a
  `podFailurePolicy` rule `Ignore` on `DisruptionTarget`, not counted) and makes a
  new one, which is the whole job run again;
- a dist job: its batch Job fails on the disrupted pod (`FailJob`, so no lone
  replacement starts), and the planner replaces every replica (`plan.py`), saying
  why (`WORKER 1 evicted: node n1 NotReady or unreachable (...)`).

A pod taken away is soon gone (a preempted pod within seconds), and its batch Job's
condition names it without saying how. What took it said so in an Event about it
(the scheduler's `Preempted`, the taint manager's `TaintManagerEviction`, the
kubelet's `Evicted`), which outlives the pod by the API server's event TTL (an hour
by default): the sync reads those Events of the pods such a condition names, only
then (`kubereads.py`), and says how from them.

`OnFailure` pods can have no `podFailurePolicy` (Kubernetes allows one only with
`restartPolicy: Never`): their batch Job counts the disrupted pod and makes a new
one; the replica is not failed for it, and a dist job is replaced whole once a sync
sees the disrupted pod.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DISRUPTION_TARGET = "DisruptionTarget"
# The Job controller's condition message when the FailJob rule on DisruptionTarget
# matched: "Pod ns/name has condition DisruptionTarget matching FailJob rule at index 0".
DISRUPTION_MESSAGE = f"has condition {DISRUPTION_TARGET} matching FailJob rule"
_FAILED_CONDITIONS = ("FailureTarget", "Failed")
_NAMED_POD = re.compile(rf"Pod (?P<namespace>[^/ ]+)/(?P<name>\S+) {DISRUPTION_MESSAGE}")
# The Event reason each component gives a pod it took away -> its DisruptionTarget reason
EVENT_REASONS = {
    "Preempted": "PreemptionByScheduler",  # kube-scheduler: "Preempted by pod U on node N"
    "TaintManagerEviction": "DeletionByTaintManager",  # "Marking for deletion Pod ns/n"
    "Evicted": "TerminationByKubelet",  # the kubelet under node pressure
}
_ON_NODE = re.compile(r"on node (\S+)")


@dataclass(frozen=True)
class Disruption:
    """Which replica Kubernetes took away, and how: `WORKER 1`, `evicted: node ...`."""

    replica: str
    what: str

    def describe(self) -> str:
        return f"{self.replica} {self.what}"


def pod_failure_rule(dist: bool) -> dict[str, Any]:
    """The batch Job's first podFailurePolicy rule (pods with restartPolicy Never): a
    dist job's replica fails on a disruption, to be run again whole by the planner; a
    local job's ignores it, and its Job makes a new pod, uncounted."""
    return {
        "action": "FailJob" if dist else "Ignore",
        "onPodConditions": [{"type": DISRUPTION_TARGET, "status": "True"}],
    }


def pod_disruption(pod: Mapping[str, Any]) -> str | None:
    """How Kubernetes took this pod away (its DisruptionTarget condition), or None."""
    status = pod.get("status") or {}
    condition = next(
        (
            c
            for c in status.get("conditions") or []
            if c.get("type") == DISRUPTION_TARGET and c.get("status") == "True"
        ),
        None,
    )
    if condition is None:
        return None
    node = str((pod.get("spec") or {}).get("nodeName") or "?")
    return _described(str(condition.get("reason") or ""), node, condition.get("message"))


def _described(reason: str, node: str, message: object) -> str:
    said = " ".join(str(message or "").split())
    detail = f"({reason}: {said})" if said else f"({reason})"
    return f"{_how(reason, node)} {detail}"


def departed_pod(batch_job: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the pod whose disruption failed this batch Job (its rule on
    DisruptionTarget matched), named by its condition; else None."""
    found = _NAMED_POD.search(failed_by_disruption(batch_job) or "")
    return (found["namespace"], found["name"]) if found else None


def event_disruption(event: Mapping[str, Any]) -> str | None:
    """How a pod was taken away, from an Event about it (core/v1) saying so, else None."""
    reason = EVENT_REASONS.get(str(event.get("reason") or ""))
    if reason is None:
        return None
    message = str(event.get("message") or "")
    on_node = _ON_NODE.search(message)
    node = on_node[1] if on_node else str((event.get("source") or {}).get("host") or "?")
    return _described(reason, node, message)


def _how(reason: str, node: str) -> str:
    if reason == "DeletionByTaintManager":  # the node lifecycle's NoExecute taints
        return f"evicted: node {node} NotReady or unreachable"
    if reason == "TerminationByKubelet":
        return f"evicted by the kubelet of node {node}"
    if reason == "PreemptionByScheduler":
        return f"preempted on node {node}"
    if reason == "DeletionByPodGC":
        return f"lost with node {node}"
    return f"evicted from node {node}"  # EvictionByEvictionAPI (a drain), or another


def failed_by_disruption(batch_job: Mapping[str, Any] | None) -> str | None:
    """The message of a batch Job failed by its rule on DisruptionTarget (also while
    only its `FailureTarget` is set, before its pod is gone), else None."""
    for condition in ((batch_job or {}).get("status") or {}).get("conditions") or []:
        if (
            condition.get("type") in _FAILED_CONDITIONS
            and condition.get("status") == "True"
            and condition.get("reason") == "PodFailurePolicy"
            and DISRUPTION_MESSAGE in str(condition.get("message") or "")
        ):
            return " ".join(str(condition.get("message")).split())
    return None


def is_disrupted(pod: Mapping[str, Any]) -> bool:
    return pod_disruption(pod) is not None


def replica_disruption(
    replica: str,
    batch_job: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    lost_pod: bool = False,
    events: Sequence[Mapping[str, Any]] = (),
) -> Disruption | None:
    """How this replica was disrupted, while it has not succeeded: a pod of it taken
    away (the newest first), else its batch Job failed by the disruption rule (the pod
    gone: how, from the `events` about it, if one says), else (`lost_pod`) a pod its
    batch Job counted is gone."""
    if int(((batch_job or {}).get("status") or {}).get("succeeded") or 0) >= 1:
        return None
    for pod in _newest_first(pods):
        if (pod.get("status") or {}).get("phase") == "Succeeded":
            continue
        what = pod_disruption(pod)
        if what is not None:
            return Disruption(replica, what)
    message = failed_by_disruption(batch_job)
    if message is not None:
        how = next(filter(None, map(event_disruption, events)), None)
        return Disruption(replica, how or f"lost its pod to a disruption ({message})")
    if lost_pod:
        return Disruption(replica, "lost its pod: deleted (a node lost, a preemption)")
    return None


Replica = tuple[
    str, Mapping[str, Any] | None, Sequence[Mapping[str, Any]], bool, Sequence[Mapping[str, Any]]
]


def first_disruption(replicas: Iterable[Replica]) -> Disruption | None:
    """The first disrupted replica of (name, batch Job, pods, lost_pod, events about its
    gone pod), in replica order."""
    for replica, batch_job, pods, lost_pod, events in replicas:
        found = replica_disruption(replica, batch_job, pods, lost_pod, events)
        if found is not None:
            return found
    return None


def _newest_first(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    def key(pod: Mapping[str, Any]) -> tuple[str, str]:
        created = str((pod.get("metadata") or {}).get("creationTimestamp") or "")
        return (str((pod.get("status") or {}).get("startTime") or created), created)

    return sorted(pods, key=key, reverse=True)
