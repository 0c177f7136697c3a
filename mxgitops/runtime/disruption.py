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
sees the disrupted pod. Only a disruption Kubernetes recorded counts as one: a pod
kept with its `DisruptionTarget` condition, or, once it is gone, an Event about it
saying it was taken away. The pod garbage collector and cleanup scripts delete failed
pods too, so a counted `OnFailure` pod gone without such a record failed the job.

The kubelet evicting a pod under node pressure (`TerminationByKubelet`) is a
disruption, unless Kubernetes says the pod used more than it asked for: its eviction
message names a container "using 3Gi, request is 1Gi" (or past its own
ephemeral-storage limit), on the pod's condition and status and in its Event, whose
`offending_containers_usage` annotation says the same. Such a pod failed by its own
use (`own_eviction`), under every restart policy: run again as it is, it would be
evicted again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mxgitops.runtime.failure import MAX_MESSAGE
from mxgitops.runtime.labels import RESTART_POLICY_ANNOTATION

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
BATCH_JOB_NAME_LABEL = "batch.kubernetes.io/job-name"  # set on pods by the Job controller
KUBELET_EVICTION = "TerminationByKubelet"
# What the kubelet's eviction message says of a pod that used more than it asked for
# (kubernetes pkg/kubelet/eviction/helpers.go), and its Event's annotations saying so.
_OVERUSE = re.compile(
    r"Container \S+ was using \S+, request is \S+"
    r"|Container \S+ exceeded its local ephemeral storage limit"
    r"|Pod ephemeral local storage usage exceeds the total limit"
    r"|Usage of EmptyDir volume \S+ exceeds the limit"
)
OFFENDING_CONTAINERS = "offending_containers"
OFFENDING_USAGE = "offending_containers_usage"
STARVED_RESOURCE = "starved_resource"
MAX_SAID = 300  # characters kept of what the cluster says of one disruption


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
    """How Kubernetes took this pod away (its DisruptionTarget condition), or None; None
    too for a kubelet eviction of a pod that used more than it asked for (`own_eviction`)."""
    condition = _disruption_condition(pod)
    if condition is None or pod_own_eviction(pod) is not None:
        return None
    node = str((pod.get("spec") or {}).get("nodeName") or "?")
    return _described(str(condition.get("reason") or ""), node, condition.get("message"))


def _disruption_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next(
        (
            c
            for c in (pod.get("status") or {}).get("conditions") or []
            if c.get("type") == DISRUPTION_TARGET and c.get("status") == "True"
        ),
        None,
    )


def pod_own_eviction(pod: Mapping[str, Any]) -> str | None:
    """The kubelet's eviction message of this pod, where it says the pod used more than
    it requested (its condition's, else its status's); else None."""
    condition = _disruption_condition(pod)
    if condition is None or condition.get("reason") != KUBELET_EVICTION:
        return None
    for message in (condition.get("message"), (pod.get("status") or {}).get("message")):
        if _OVERUSE.search(str(message or "")):
            return plain(message, MAX_MESSAGE)
    return None


def event_own_eviction(event: Mapping[str, Any]) -> str | None:
    """The kubelet's eviction Event of a pod, where its annotations (or its message) say
    the pod used more than it requested; else None. `starved_resource` alone says only
    what the node lacked: the kubelet writes it for every eviction."""
    if event.get("reason") != "Evicted":
        return None
    message = plain(event.get("message"), MAX_MESSAGE)
    annotations = (event.get("metadata") or {}).get("annotations") or {}
    usage = plain(annotations.get(OFFENDING_USAGE), MAX_SAID)
    if usage:
        containers = plain(annotations.get(OFFENDING_CONTAINERS), MAX_SAID) or "?"
        starved = plain(annotations.get(STARVED_RESOURCE), MAX_SAID) or "?"
        return f"{message} (containers {containers} using {usage} of {starved})".lstrip()
    return message if _OVERUSE.search(message) else None


def own_eviction(
    batch_job: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]] = (),
) -> str | None:
    """Why a replica failed by its own use, as the kubelet that evicted a pod of it said:
    a failed pod kept (the newest first), else an Event about a gone one; else None."""
    if int(((batch_job or {}).get("status") or {}).get("succeeded") or 0) >= 1:
        return None
    for pod in _newest_first(pods):
        if (pod.get("status") or {}).get("phase") == "Failed":
            said = pod_own_eviction(pod)
            if said is not None:
                return said
    return next(filter(None, map(event_own_eviction, events)), None)


def plain(text: object, limit: int) -> str:
    """Text from the cluster made one bounded, printable line."""
    said = " ".join(str(text or "").split())[:limit]
    return "".join(ch if ch.isprintable() else "?" for ch in said)


def _described(reason: str, node: str, message: object) -> str:
    said = plain(message, MAX_MESSAGE)
    detail = f"({plain(reason, MAX_SAID)}: {said})" if said else f"({plain(reason, MAX_SAID)})"
    return f"{_how(reason, plain(node, MAX_SAID))} {detail}"


def departed_pod(batch_job: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the pod whose disruption failed this batch Job (its rule on
    DisruptionTarget matched), named by its condition; else None."""
    found = _NAMED_POD.search(failed_by_disruption(batch_job) or "")
    return (found["namespace"], found["name"]) if found else None


def event_disruption(event: Mapping[str, Any]) -> str | None:
    """How a pod was taken away, from an Event about it (core/v1) saying so, else None."""
    reason = EVENT_REASONS.get(str(event.get("reason") or ""))
    if reason is None or event_own_eviction(event) is not None:
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


def counted_and_gone(batch_job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> bool:
    """Whether `batch_job`, of `OnFailure` pods, counted more failed pods than it has of
    `pods`: how they went only Events about them can say (nothing names them)."""
    metadata = batch_job.get("metadata") or {}
    recorded = (metadata.get("annotations") or {}).get(RESTART_POLICY_ANNOTATION)
    template = ((batch_job.get("spec") or {}).get("template") or {}).get("spec") or {}
    counted = int((batch_job.get("status") or {}).get("failed") or 0)
    if counted == 0 or (recorded or template.get("restartPolicy")) != "OnFailure":
        return False
    name, namespace = metadata.get("name"), metadata.get("namespace")
    kept = sum(
        1
        for p in pods
        if (p.get("status") or {}).get("phase") == "Failed"
        and ((p.get("metadata") or {}).get("labels") or {}).get(BATCH_JOB_NAME_LABEL) == name
        and (p.get("metadata") or {}).get("namespace") == namespace
    )
    return counted > kept


def replaced(replica: str, pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """The disruptions of this replica's failed pods kept, oldest first: those a local
    job's batch Job ignored and replaced with a new pod (`pod_failure_rule`)."""
    return [
        Disruption(replica, what).describe()
        for pod in reversed(_newest_first(pods))
        if (pod.get("status") or {}).get("phase") == "Failed"
        and (what := pod_disruption(pod)) is not None
    ]


def is_disrupted(pod: Mapping[str, Any]) -> bool:
    return pod_disruption(pod) is not None


def replica_disruption(
    replica: str,
    batch_job: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    lost_pod: bool = False,
    events: Sequence[Mapping[str, Any]] = (),
) -> Disruption | None:
    """How this replica was disrupted, while it has not succeeded nor failed by its own
    use (`own_eviction`): a pod of it taken away (the newest first), else its batch Job
    failed by the disruption rule (the pod gone: how, from the `events` about it, if one
    says), else (`lost_pod`) a pod its batch Job counted is gone, which an Event about it
    says was taken away (`status.counts_as_failure`)."""
    if int(((batch_job or {}).get("status") or {}).get("succeeded") or 0) >= 1:
        return None
    if own_eviction(batch_job, pods, events) is not None:
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
        how = next(filter(None, map(event_disruption, events)), None)
        return Disruption(replica, how or "lost its pod to a disruption")
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
