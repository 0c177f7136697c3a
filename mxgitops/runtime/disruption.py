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

`OnFailure` pods can have no `podFailurePolicy` (Kubernetes allows one only with
`restartPolicy: Never`): their batch Job counts the disrupted pod and makes a new
one; the replica is not failed for it, and a dist job is replaced whole once a sync
sees the disrupted pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DISRUPTION_TARGET = "DisruptionTarget"
# The Job controller's condition message when the FailJob rule on DisruptionTarget
# matched: "Pod ns/name has condition DisruptionTarget matching FailJob rule at index 0".
DISRUPTION_MESSAGE = f"has condition {DISRUPTION_TARGET} matching FailJob rule"
_FAILED_CONDITIONS = ("FailureTarget", "Failed")


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
    reason = str(condition.get("reason") or "")
    said = " ".join(str(condition.get("message") or "").split())
    detail = f"({reason}: {said})" if said else f"({reason})"
    return f"{_how(reason, node)} {detail}"


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
) -> Disruption | None:
    """How this replica was disrupted, while it has not succeeded: a pod of it taken
    away (the newest first), else its batch Job failed by the disruption rule (the pod
    went with its node), else (`lost_pod`) a pod its batch Job counted is gone."""
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
        return Disruption(replica, f"lost its pod to a disruption ({message})")
    if lost_pod:
        return Disruption(replica, "lost its pod: deleted (a node lost, a preemption)")
    return None


def first_disruption(
    replicas: Iterable[tuple[str, Mapping[str, Any] | None, Sequence[Mapping[str, Any]], bool]],
) -> Disruption | None:
    """The first disrupted replica of (name, batch Job, pods, lost_pod), in replica order."""
    for replica, batch_job, pods, lost_pod in replicas:
        found = replica_disruption(replica, batch_job, pods, lost_pod)
        if found is not None:
            return found
    return None


def _newest_first(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    def key(pod: Mapping[str, Any]) -> tuple[str, str]:
        created = str((pod.get("metadata") or {}).get("creationTimestamp") or "")
        return (str((pod.get("status") or {}).get("startTime") or created), created)

    return sorted(pods, key=key, reverse=True)
