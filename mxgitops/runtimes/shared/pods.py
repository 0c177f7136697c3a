"""One pod read as a replica, whichever runtime made it: pure.

The `mxnet` container's termination, why a pod waits, which pod of a replica is its
newest, and the replica state one pod gives under a restart policy (the rules are
`batch/status.py`'s, kept by every runtime).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mxgitops.model import CONTAINER_NAME, RestartPolicy
from mxgitops.runtimes.shared.disruption import is_disrupted
from mxgitops.runtimes.shared.state import ReplicaState


def mxnet_terminated(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    """The `mxnet` container's termination in `pod` ({} while it has none)."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if container.get("name") == CONTAINER_NAME:
            return ((container.get("state") or {}).get("terminated")) or {}
    return {}


def last_terminated(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The `mxnet` container's termination: the current one, else the last (restarted);
    None without an `mxnet` container status."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    container = next((c for c in statuses if c.get("name") == CONTAINER_NAME), None)
    if container is None:
        return None
    terminated: Mapping[str, Any] | None = (container.get("state") or {}).get("terminated") or (
        container.get("lastState") or {}
    ).get("terminated")
    return terminated


# ExitCode (Kubeflow): 1-127 are the program's own verdict and fail the job at
# once; anything else (signals: 137, 143, ...) is retried within backoffLimit.
PERMANENT_EXIT_CODES = range(1, 128)


def pending_reason(pod: Mapping[str, Any]) -> str:
    """Why a pod waits: the scheduler's message (`0/4 nodes are available: 4 Insufficient
    nvidia.com/gpu.`), else its `mxnet` container's waiting reason (ErrImagePull...)."""
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return " ".join(str(condition.get("message") or condition.get("reason") or "").split())
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if container.get("name") == CONTAINER_NAME and waiting.get("reason"):
            detail = " ".join(str(waiting.get("message") or "").split())
            return f"{waiting['reason']}: {detail}" if detail else str(waiting["reason"])
    return ""


def newest_pod(pods: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """By status.startTime, then creationTimestamp, then name (RFC 3339 UTC sorts as text).

    A pod that has not started yet counts from its creation, so a fresh retry
    is newer than the pod it replaces.
    """

    def key(pod: Mapping[str, Any]) -> tuple[str, str, str]:
        created = str((pod.get("metadata") or {}).get("creationTimestamp") or "")
        started = str((pod.get("status") or {}).get("startTime") or created)
        return (started, created, str((pod.get("metadata") or {}).get("name") or ""))

    return max(pods, key=key)


def pod_replica_state(pod: Mapping[str, Any], restart: RestartPolicy | None = None) -> ReplicaState:
    """The newest pod's replica state under `restart` (the module docstring's rules;
    None: the pod's own restartPolicy, `ExitCode` reading as the `Never` it runs as);
    a pod not yet running (unscheduled, pulling its image) is Pending."""
    if restart is None:
        own = (pod.get("spec") or {}).get("restartPolicy")
        on_failure = own == RestartPolicy.ON_FAILURE.value
        restart = RestartPolicy.ON_FAILURE if on_failure else RestartPolicy.NEVER
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase == "Pending":
        return ReplicaState.PENDING
    container = next(
        (c for c in status.get("containerStatuses") or [] if c.get("name") == CONTAINER_NAME),
        None,
    )
    state: Mapping[str, Any] = (container or {}).get("state") or {}
    terminated = state.get("terminated")
    if phase == "Failed":
        if is_disrupted(pod):
            return ReplicaState.RUNNING  # taken away by Kubernetes: runs again (disruption.py)
        if restart is RestartPolicy.EXIT_CODE and is_retryable_termination(terminated or {}):
            return ReplicaState.RUNNING  # a new pod is on its way
        return ReplicaState.FAILED
    if phase == "Succeeded":
        return ReplicaState.SUCCEEDED
    if container is None:
        return ReplicaState.UNKNOWN
    if state.get("running") is not None or state.get("waiting") is not None:
        return ReplicaState.RUNNING
    if terminated is None:
        return ReplicaState.UNKNOWN
    if int(terminated.get("exitCode", -1)) == 0:
        return ReplicaState.SUCCEEDED
    if restart is RestartPolicy.ON_FAILURE:
        return ReplicaState.RUNNING  # the kubelet restarts it in place
    if restart is RestartPolicy.EXIT_CODE and is_retryable_termination(terminated):
        return ReplicaState.RUNNING
    return ReplicaState.FAILED  # Never: it will not run again


def is_retryable_termination(terminated: Mapping[str, Any]) -> bool:
    """Whether `ExitCode` retries this termination of the `mxnet` container: exit codes
    from 128 (137 SIGKILL, an OOMKilled 137, 143 SIGTERM are the infrastructure's), as
    the operator's IsRetryableExitCode; 1-127 are the program's own verdict, and 0 in a
    failed pod (another container failed it) is not retried either. A pod failed
    without a termination of its `mxnet` container (evicted before it ran) is retried."""
    code = terminated.get("exitCode")
    return not isinstance(code, int) or code >= 128
