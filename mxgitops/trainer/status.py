"""Read a job's state back from its Kubernetes objects: the seed's rules, pure.

Per replica: its batch Job decides first (succeeded >= 1 → Succeeded; a
`Failed` condition, from backoffLimit or the deadline → Failed; no Job →
Unknown). Otherwise the newest pod's `mxnet` container decides, preferring its
last termination when it has one: running or waiting → Running, exit 0 →
Succeeded, a retryable termination → Running (Kubernetes retries it), anything
else → Failed; no pod or no container status → Unknown.

Replica sets and the job aggregate as the seed did. The functions take plain
objects, so the planner, the report and the façade all judge a job the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from mxgitops import objects
from mxgitops.objects import KubeObject, LiveObjects
from mxgitops.spec import CONTAINER_NAME, JobMode, MxJob, ReplicaType, SuccessPolicy
from mxgitops.trainer.labels import JOB_TYPE_LABEL, RUNTIME_ID_LABEL, TASK_INDEX_LABEL


class State(StrEnum):
    PENDING = "Pending"  # no replica runs yet: not scheduled, no pod yet, image pulling
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"  # its batch Jobs are suspended (runPolicy.suspend)
    WAITING = "Waiting"  # a change waits for it to finish (on-change: wait)
    DELETING = "Deleting"  # being pruned
    # With queues (the JobSet runtime under Kueue):
    QUEUED = "Queued"  # waits in its queue to be admitted whole (Kueue's reason says why)
    PREEMPTED = "Preempted"  # stopped whole by Kueue for a higher priority; runs again
    EVICTED = "Evicted"  # stopped whole by Kueue for another reason; runs again


class ReplicaState(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"
    UNKNOWN = "Unknown"  # no batch Job (gone, or removed by ttlSecondsAfterFinished)


@dataclass(frozen=True)
class MxReplicaStatus:
    """One replica set: its overall state and how many replicas are in each state;
    `reason` says why a pending replica waits (the scheduler's message)."""

    type: ReplicaType
    state: ReplicaState
    replicas_states: Mapping[ReplicaState, int]
    reason: str = ""


@dataclass(frozen=True)
class JobShape:
    """What status needs to know of a job: from its MxJob, or from live annotations."""

    namespace: str
    name: str
    runtime_id: str
    mode: JobMode
    success_policy: SuccessPolicy
    replicas: Mapping[ReplicaType, int]  # in replica order

    @classmethod
    def of(cls, job: MxJob) -> JobShape:
        return cls(
            namespace=job.namespace,
            name=job.name,
            runtime_id=job.runtime_id,
            mode=job.mode,
            success_policy=job.success_policy,
            replicas={r.type: r.replicas for r in job.replica_specs},
        )


def job_status(job: MxJob, live: LiveObjects) -> tuple[State, list[MxReplicaStatus]]:
    """The state of this runtime of `job`, judged from `live` (other objects are ignored)."""
    return shape_status(JobShape.of(job), live)


def shape_status(shape: JobShape, live: LiveObjects) -> tuple[State, list[MxReplicaStatus]]:
    found = _Replicas.of(shape, live)
    statuses = [
        _replica_set_status(replica_type, count, found)
        for replica_type, count in shape.replicas.items()
    ]
    return job_state(shape.mode, shape.success_policy, statuses), statuses


def replica_set_status(
    shape: JobShape, replica_type: ReplicaType, replicas: int, live: LiveObjects
) -> MxReplicaStatus:
    return _replica_set_status(replica_type, replicas, _Replicas.of(shape, live))


def _replica_set_status(
    replica_type: ReplicaType, replicas: int, found: _Replicas
) -> MxReplicaStatus:
    states, reasons = [], []
    for batch_job, replica_pods in found.replica_set(replica_type, replicas):
        state = replica_state(batch_job, replica_pods)
        states.append(state)
        if state is ReplicaState.PENDING and replica_pods:
            reasons.append(pending_reason(newest_pod(replica_pods)))
    return aggregate(replica_type, replicas, states, next((r for r in reasons if r), ""))


def replicas_of(
    shape: JobShape, live: LiveObjects
) -> list[tuple[ReplicaType, int, KubeObject | None, list[KubeObject]]]:
    """Every replica of the judged runtime: (type, index, its batch Job, its pods)."""
    found = _Replicas.of(shape, live)
    return [
        (replica_type, index, batch_job, pods)
        for replica_type, count in shape.replicas.items()
        for index, (batch_job, pods) in enumerate(found.replica_set(replica_type, count))
    ]


@dataclass(frozen=True, slots=True)
class _Replicas:
    """The batch Jobs and pods of one runtime by replica (its `job_type` label and
    task index), sorted out in one pass: looking each replica up in every object
    made a job's status quadratic in its replicas."""

    jobs: Mapping[tuple[str, int], KubeObject]  # the first one listed, if several
    pods: Mapping[tuple[str, int], list[KubeObject]]  # in the order listed

    @classmethod
    def of(cls, shape: JobShape, live: LiveObjects) -> _Replicas:
        jobs: dict[tuple[str, int], KubeObject] = {}
        pods: dict[tuple[str, int], list[KubeObject]] = {}
        for obj in live.jobs:
            key = _replica_key(obj, shape)
            if key is not None:
                jobs.setdefault(key, obj)
        for pod in live.pods:
            key = _replica_key(pod, shape)
            if key is not None:
                pods.setdefault(key, []).append(pod)
        return cls(jobs, pods)

    def replica_set(
        self, replica_type: ReplicaType, replicas: int
    ) -> list[tuple[KubeObject | None, list[KubeObject]]]:
        """Each replica's batch Job and pods, by index."""
        label = replica_type.value
        return [
            (self.jobs.get((label, index)), self.pods.get((label, index), []))
            for index in range(replicas)
        ]


def aggregate(
    replica_type: ReplicaType, replicas: int, states: Sequence[ReplicaState], reason: str = ""
) -> MxReplicaStatus:
    """Failed if any failed, else Running if any runs, Pending if any waits to run,
    Suspended if any is, Succeeded if all did, else Unknown."""
    counts: dict[ReplicaState, int] = {}
    for one in states:  # as Counter would count them, without its cost per replica set
        counts[one] = counts.get(one, 0) + 1
    for state in _PRECEDENCE:
        if state in counts:
            break
    else:
        all_done = counts.get(ReplicaState.SUCCEEDED, 0) == replicas
        state = ReplicaState.SUCCEEDED if all_done else ReplicaState.UNKNOWN
    shown = reason if state is ReplicaState.PENDING else ""
    return MxReplicaStatus(replica_type, state, counts, shown)


# Any replica in one of these states gives its set that state, the first found first.
_PRECEDENCE = (
    ReplicaState.FAILED,
    ReplicaState.RUNNING,
    ReplicaState.PENDING,
    ReplicaState.SUSPENDED,
)


def job_state(
    mode: JobMode, success_policy: SuccessPolicy, statuses: Sequence[MxReplicaStatus]
) -> State:
    """Any set Failed → Failed; the deciding set Succeeded → Succeeded; then Running if
    any replica runs, Suspended if its replicas are suspended, Pending if any waits to
    run (the seed said Running: a person needs to know nothing runs yet), else Running.

    The deciding set is WORKER for a local job and SCHEDULER for a dist job,
    unless the success policy is AllWorkers (e.g. BytePS, whose scheduler never
    exits): then it is WORKER alone.
    """
    by_type = {s.type: s.state for s in statuses}
    if ReplicaState.FAILED in by_type.values():
        return State.FAILED
    deciding = (
        ReplicaType.SCHEDULER
        if mode is JobMode.DIST and success_policy is SuccessPolicy.SCHEDULER
        else ReplicaType.WORKER
    )
    if by_type.get(deciding) is ReplicaState.SUCCEEDED:
        return State.SUCCEEDED
    if ReplicaState.RUNNING in by_type.values():
        return State.RUNNING
    if ReplicaState.SUSPENDED in by_type.values():
        return State.SUSPENDED
    if ReplicaState.PENDING in by_type.values():
        return State.PENDING
    return State.RUNNING


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


def replica_state(
    batch_job: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]]
) -> ReplicaState:
    """One replica's state from its batch Job and that Job's pods."""
    if batch_job is None:
        return ReplicaState.UNKNOWN
    job_status_: Mapping[str, Any] = batch_job.get("status") or {}
    if int(job_status_.get("succeeded") or 0) >= 1:
        return ReplicaState.SUCCEEDED
    if any(
        c.get("type") == "Failed" and c.get("status") == "True"
        for c in job_status_.get("conditions") or []
    ):
        return ReplicaState.FAILED
    if (batch_job.get("spec") or {}).get("suspend"):
        return ReplicaState.SUSPENDED
    if not pods:
        return ReplicaState.PENDING  # the Job controller has not made its pod yet
    return pod_replica_state(newest_pod(pods))


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


def pod_replica_state(pod: Mapping[str, Any]) -> ReplicaState:
    """The seed's replicaStatusFromPodList, for the newest pod; a pod not yet running
    (unscheduled, pulling its image) is Pending, where the seed said Running."""
    if (pod.get("status") or {}).get("phase") == "Pending":
        return ReplicaState.PENDING
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    container = next((c for c in statuses if c.get("name") == CONTAINER_NAME), None)
    if container is None:
        return ReplicaState.UNKNOWN
    last_terminated = (container.get("lastState") or {}).get("terminated")
    state: Mapping[str, Any] = (
        {"terminated": last_terminated} if last_terminated else container.get("state") or {}
    )
    if state.get("running") is not None or state.get("waiting") is not None:
        return ReplicaState.RUNNING
    terminated = state.get("terminated")
    if terminated is None:
        return ReplicaState.UNKNOWN
    if int(terminated.get("exitCode", -1)) == 0:
        return ReplicaState.SUCCEEDED
    if is_retryable_termination(terminated):
        return ReplicaState.RUNNING
    return ReplicaState.FAILED


def is_retryable_termination(terminated: Mapping[str, Any]) -> bool:
    """The seed's isRetryableTerminationState.

    OOMKilled is the program's fault (checked first: an OOM may leave no
    message). No termination message means the launcher did not exit cleanly,
    e.g. the container never started: retry. Exit codes 0-127 are the
    program's own verdict: permanent. Above 127 (137 SIGKILL, 143 SIGTERM) is
    an infrastructure kill: retry.
    """
    if terminated.get("reason") == "OOMKilled":
        return False
    if not terminated.get("message"):
        return True
    return not 0 <= int(terminated.get("exitCode", -1)) <= 127


def in_namespace(live: LiveObjects, namespace: str) -> LiveObjects:
    """Only the objects in `namespace`: a LIST spans namespaces, and a same-named
    job in another namespace is another job."""

    def keep(items: tuple[KubeObject, ...]) -> tuple[KubeObject, ...]:
        return tuple(o for o in items if (o.get("metadata") or {}).get("namespace") == namespace)

    return LiveObjects(keep(live.jobs), keep(live.services), keep(live.pods))


def _replica_key(obj: KubeObject, shape: JobShape) -> tuple[str, int] | None:
    """(job_type label, task index) of an object of `shape`'s runtime; None for any other
    object, or one without a task index. Keyed by the label's text: hashing the text
    is cheaper than hashing a ReplicaType, and the lookups are many."""
    metadata = obj.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if (
        metadata.get("namespace", shape.namespace) != shape.namespace
        or labels.get(objects.JOB_NAME_LABEL) != shape.name
        or labels.get(RUNTIME_ID_LABEL) != shape.runtime_id
    ):
        return None
    index = labels.get(TASK_INDEX_LABEL, "")
    return (labels.get(JOB_TYPE_LABEL, ""), int(index)) if index.isdigit() else None
