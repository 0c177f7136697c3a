"""Why a batch job failed, read from its batch Jobs and pods while they exist: pure.

The failed replica's newest pod (the `mxnet` container's exit code, reason and
termination message) and its batch Job's `Failed` condition; or, for a job failed by
its backoffLimit counted job-wide, the replica that retried most (`runtime/failure.py`
says why a `Failure` is kept in the ledger).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mxgitops.batch.status import JobShape, backoff_exceeded, replica_state, replicas_of
from mxgitops.objects import KubeObject, LiveObjects
from mxgitops.runtime.disruption import own_eviction
from mxgitops.runtime.failure import MAX_MESSAGE, Failure
from mxgitops.runtime.pods import last_terminated, newest_pod
from mxgitops.runtime.state import ReplicaState

BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"  # the Job controller's and operator's reason
EVICTED = "Evicted"  # the kubelet's reason, for a pod it evicted for its own use


def replica_failure(
    replica: str,
    batch_job: Mapping[str, Any] | None,
    pods: Sequence[KubeObject],
    events: Sequence[KubeObject] = (),
) -> Failure | None:
    """What made this replica fail, or None if it did not: the kubelet's eviction
    message first, where it evicted a pod of it for its own use."""
    if replica_state(batch_job, pods, events) is not ReplicaState.FAILED:
        return None
    reasons, message, exit_code, pod_name = (
        [],
        own_eviction(batch_job, pods, events) or "",
        None,
        "",
    )
    if message:
        reasons.append(EVICTED)
    if pods:
        pod = newest_pod(pods)
        pod_name = str((pod.get("metadata") or {}).get("name") or "")
        terminated = last_terminated(pod)
        if terminated:
            exit_code = int(terminated.get("exitCode", -1))
            reasons.append(str(terminated.get("reason") or ""))
            message = message or str(terminated.get("message") or "")
    for condition in ((batch_job or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            reasons.append(str(condition.get("reason") or ""))
            message = message or str(condition.get("message") or "")
    reason = "; ".join(dict.fromkeys(r for r in reasons if r))
    return Failure(replica, exit_code, reason, " ".join(message.split())[:MAX_MESSAGE], pod_name)


def backoff_failure(shape: JobShape, live: LiveObjects) -> Failure | None:
    """A job failed by its backoffLimit, counted job-wide while no replica failed: the
    replica that retried most, and the count."""
    exceeded = backoff_exceeded(shape, live)
    if exceeded is None:
        return None
    (replica_type, index), why = exceeded
    pods = [
        pod
        for type_, index_, _, replica_pods, _ in replicas_of(shape, live)
        if (type_, index_) == (replica_type, index)
        for pod in replica_pods
    ]
    pod = newest_pod(pods) if pods else {}
    terminated = last_terminated(pod) or {}
    last = " ".join(str(terminated.get("message") or "").split())
    return Failure(
        f"{replica_type.value} {index}",
        int(terminated["exitCode"]) if "exitCode" in terminated else None,
        "; ".join(r for r in (str(terminated.get("reason") or ""), BACKOFF_LIMIT_EXCEEDED) if r),
        (f"{why}; last: {last}" if last else why)[:MAX_MESSAGE],
        str((pod.get("metadata") or {}).get("name") or ""),
    )
