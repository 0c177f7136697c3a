"""Why a job failed, read from its objects while they exist: pure.

The state alone (`WORKER Failed`) tells nobody what to fix. The failed
replica's newest pod still says it: the `mxnet` container's exit code,
reason (`OOMKilled`, `Error`) and termination message, and the batch Job's
`Failed` condition (`BackoffLimitExceeded`, `DeadlineExceeded`, a pod
failure policy rule). Both go once `cleanPodPolicy` or a TTL removes the
objects, so the planner copies a `Failure` into the ledger entry of the job
the sync first sees failed, together with the last lines of the container's
log, which the sync reads (`failurelog.py`) before anything is deleted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from mxgitops.objects import KubeObject, LiveObjects
from mxgitops.spec import CONTAINER_NAME
from mxgitops.trainer.status import (
    JobShape,
    ReplicaState,
    backoff_exceeded,
    newest_pod,
    replica_state,
    replicas_of,
)

BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"  # the Job controller's and operator's reason

MAX_MESSAGE = 1024  # characters of a termination or condition message kept


@dataclass(frozen=True)
class Failure:
    replica: str  # e.g. "WORKER 0"
    exit_code: int | None = None
    reason: str = ""  # the container's, then the batch Job's: "OOMKilled; BackoffLimitExceeded"
    message: str = ""
    pod: str = ""  # whose log is read; empty once the pod is gone
    container: str = CONTAINER_NAME
    log: str = ""  # the last lines of the failed container's log, or why there are none

    def describe(self) -> str:
        code = f" exited {self.exit_code}" if self.exit_code is not None else " failed"
        why = f" ({self.reason})" if self.reason else ""
        return f"{self.replica}{code}{why}" + (f": {self.message}" if self.message else "")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Failure:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    @classmethod
    def from_json(cls, text: str) -> Failure | None:
        try:
            data = json.loads(text)
            return cls.from_mapping(data) if isinstance(data, dict) else None
        except (ValueError, TypeError):
            return None

    def with_log(self, log: str) -> Failure:
        return replace(self, log=log)


def replica_failure(
    replica: str, batch_job: Mapping[str, Any] | None, pods: Sequence[KubeObject]
) -> Failure | None:
    """What made this replica fail, or None if it did not."""
    if replica_state(batch_job, pods) is not ReplicaState.FAILED:
        return None
    reasons, message, exit_code, pod_name = [], "", None, ""
    if pods:
        pod = newest_pod(pods)
        pod_name = str((pod.get("metadata") or {}).get("name") or "")
        terminated = _terminated(pod)
        if terminated:
            exit_code = int(terminated.get("exitCode", -1))
            reasons.append(str(terminated.get("reason") or ""))
            message = str(terminated.get("message") or "")
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
        for type_, index_, _, replica_pods in replicas_of(shape, live)
        if (type_, index_) == (replica_type, index)
        for pod in replica_pods
    ]
    pod = newest_pod(pods) if pods else {}
    terminated = _terminated(pod) or {}
    last = " ".join(str(terminated.get("message") or "").split())
    return Failure(
        f"{replica_type.value} {index}",
        int(terminated["exitCode"]) if "exitCode" in terminated else None,
        "; ".join(r for r in (str(terminated.get("reason") or ""), BACKOFF_LIMIT_EXCEEDED) if r),
        (f"{why}; last: {last}" if last else why)[:MAX_MESSAGE],
        str((pod.get("metadata") or {}).get("name") or ""),
    )


def _terminated(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The `mxnet` container's termination: the current one, else the last (restarted)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    container = next((c for c in statuses if c.get("name") == CONTAINER_NAME), None)
    if container is None:
        return None
    terminated: Mapping[str, Any] | None = (container.get("state") or {}).get("terminated") or (
        container.get("lastState") or {}
    ).get("terminated")
    return terminated
