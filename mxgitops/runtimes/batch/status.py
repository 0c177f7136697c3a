"""Read a job's state back from its Kubernetes objects: pure. The failure semantics.

These are Kubeflow's training operator's (v1.8.1, measured side by side by
`tests/kubeflow/`), kept by every runtime that runs an MXJob. Each replica has
a restart policy (the replica's `restartPolicy`, default `Never`):

- `Never`: the first failed pod fails the job; nothing retries it (its batch
  Job's backoffLimit is 0). A ps-lite worker or server started again does not
  rejoin a running job: a retry would only hang it, holding its GPUs. Every
  failure counts, whatever its exit code or termination message.
- `OnFailure`: the container restarts in place (the kubelet), and the replica
  stays Running; a pod that fails all the same fails the job, also once it is gone
  (the pod garbage collector deletes failed pods), unless Kubernetes recorded that it
  took the pod away (`disruption.py`).
- `ExitCode`: exit codes 1-127 are the program's own verdict and fail the job
  at once (a pod failure policy); so does a pod failed while `mxnet` exited 0
  (a sidecar failed it: read here, no pod failure policy can name 0); any other
  failure (137 SIGKILL, OOMKilled, 143, an eviction) is retried with a new pod,
  and the replica stays Running, also while that new pod waits to be made,
  scheduled or started.

A pod Kubernetes took away (its `DisruptionTarget` condition: evicted, preempted,
its node lost) is no failure under any policy (`disruption.py`, where Kubeflow's
operator failed the job): the replica reads Running, the job runs again whole. A pod
the kubelet evicted for using more than it requested failed by its own use: the
replica reads Failed, under any policy.

`runPolicy.backoffLimit` is one budget for the whole job, as the operator
counted it: the container restarts of `OnFailure` replicas (in running pods)
plus the retried failures of `ExitCode` replicas, summed over every replica.
The job fails once the restarts reach it, or the retried failures exceed it
(`backoff_exceeded`). Without backoffLimit, `OnFailure` and `ExitCode` retry
without limit, as the operator did (`Never` never retries). Each batch Job's
own backoffLimit is never below the job's, so the job-wide count decides.

Every rule reads a fact Kubernetes will not undo (a failed pod that will not
be retried, a batch Job's failure count, a restart count), so a state read as
Failed stays Failed: it never goes Failed, then Running once a retry starts.

Per replica: its batch Job decides first (succeeded >= 1 → Succeeded; a
`Failed` condition → Failed; suspended → Suspended; under `Never` and
`OnFailure`, a failed pod counted → Failed; no Job → Unknown). Otherwise its
newest pod: Pending → Pending; failed → by the policy above; else its `mxnet`
container: running or waiting → Running, exit 0 → Succeeded, another exit by
the policy (`OnFailure`: restarting, Running); no container status → Unknown.

Replica sets and the job aggregate as the seed did: any replica set Failed →
Failed; the deciding set (SCHEDULER of a dist job, else WORKER; WORKER under
`successPolicy: AllWorkers`) Succeeded → Succeeded. Both at once: whichever
came first, by the containers' finish times, as the operator, acting on each
pod event, decided (`_succeeded_first`). A finished job's replicas
still active are stopped by the planner (`plan.py`, STOP). The functions take
plain objects, so the planner and the report judge a job alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mxgitops import objects
from mxgitops.model import (
    JobMode,
    MxJob,
    ReplicaType,
    RestartPolicy,
    SuccessPolicy,
)
from mxgitops.objects import KubeObject, LiveObjects
from mxgitops.runtimes.batch.finishing import finished_at, succeeded_first
from mxgitops.runtimes.shared.disruption import (
    event_disruption,
    failed_by_disruption,
    is_disrupted,
    own_eviction,
)
from mxgitops.runtimes.shared.labels import (
    JOB_TYPE_LABEL,
    RESTART_POLICY_ANNOTATION,
    RUNTIME_ID_LABEL,
    TASK_INDEX_LABEL,
)
from mxgitops.runtimes.shared.pods import (
    is_retryable_termination,
    mxnet_terminated,
    newest_pod,
    pending_reason,
    pod_replica_state,
)
from mxgitops.runtimes.shared.state import (
    MxReplicaStatus,
    ReplicaState,
    State,
    aggregate,
    deciding_type,
    job_state,
)

_RESTART_POLICIES = {policy.value: policy for policy in RestartPolicy}


@dataclass(frozen=True)
class JobShape:
    """What status needs to know of a job: from its MxJob, or from live annotations."""

    namespace: str
    name: str
    runtime_id: str
    mode: JobMode
    success_policy: SuccessPolicy
    replicas: Mapping[ReplicaType, int]  # in replica order
    backoff_limit: int | None = None  # the job's, counted job-wide

    @classmethod
    def of(cls, job: MxJob) -> JobShape:
        return cls(
            namespace=job.namespace,
            name=job.name,
            runtime_id=job.runtime_id,
            mode=job.mode,
            success_policy=job.success_policy,
            replicas={r.type: r.replicas for r in job.replica_specs},
            backoff_limit=job.run_policy.backoff_limit,
        )


def job_status(job: MxJob, live: LiveObjects) -> tuple[State, list[MxReplicaStatus]]:
    """The state of this runtime of `job`, judged from `live` (other objects are ignored)."""
    return shape_status(JobShape.of(job), live)


def shape_status(
    shape: JobShape, live: LiveObjects, found: Replicas | None = None
) -> tuple[State, list[MxReplicaStatus]]:
    """The state of `shape`'s runtime from `live` (`found`: `live` sorted by replica,
    as `Replicas.of` sorts it, where the caller keeps it for its other readings)."""
    found = found or Replicas.of(shape, live)
    statuses = [
        _replica_set_status(replica_type, count, found)
        for replica_type, count in shape.replicas.items()
    ]
    state = job_state(shape.mode, shape.success_policy, statuses)
    if state is State.FAILED and _succeeded_first(shape, found):
        state = State.SUCCEEDED
    if state is not State.SUCCEEDED and _backoff_exceeded(shape, found) is not None:
        return State.FAILED, statuses
    return state, statuses


def _succeeded_first(shape: JobShape, found: Replicas) -> bool:
    """Whether the deciding set succeeded before any replica failed (`finishing.py`)."""
    deciding = deciding_type(shape.mode, shape.success_policy)
    succeeded: list[str | None] = []
    failed: list[str | None] = []
    for replica_type, count in shape.replicas.items():
        for batch_job, pods in found.replica_set(replica_type, count):
            state = replica_state(batch_job, pods, found.events_of(batch_job))
            if state is ReplicaState.FAILED:
                failed.append(finished_at(batch_job, pods, failed=True))
            elif replica_type is deciding:
                done = state is ReplicaState.SUCCEEDED
                succeeded.append(finished_at(batch_job, pods, failed=False) if done else None)
    return succeeded_first(succeeded, failed)


def backoff_exceeded(
    shape: JobShape, live: LiveObjects
) -> tuple[tuple[ReplicaType, int], str] | None:
    """((type, index) of the replica that retried most, why) when the job's retries used up its
    backoffLimit; None while they did not, or it sets none."""
    return _backoff_exceeded(shape, Replicas.of(shape, live))


def _backoff_exceeded(
    shape: JobShape, found: Replicas
) -> tuple[tuple[ReplicaType, int], str] | None:
    limit = shape.backoff_limit
    if limit is None:
        return None
    restarts = failures = 0
    most, most_retries = (ReplicaType.WORKER, 0), -1  # the first that retried most
    for replica_type, count in shape.replicas.items():
        for index, (batch_job, pods) in enumerate(found.replica_set(replica_type, count)):
            restarted, retried = replica_retries(batch_job, pods)
            restarts, failures = restarts + restarted, failures + retried
            if restarted + retried > most_retries:
                most, most_retries = (replica_type, index), restarted + retried
    if not is_past_backoff_limit(limit, restarts, failures):
        return None
    counted = " and ".join(
        f"{n} {what}"
        for n, what in ((restarts, "container restarts"), (failures, "retried pod failures"))
        if n
    )
    return most, f"{counted} across the job used up its backoffLimit of {limit}"


def is_past_backoff_limit(limit: int, restarts: int, failures: int) -> bool:
    """The operator's rule for restarts (they reach the limit; any, if it is 0), and
    the Job controller's for retried failures (more than the limit)."""
    total = restarts + failures
    return total > limit or (restarts > 0 and total >= limit)


def replica_retries(
    batch_job: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]]
) -> tuple[int, int]:
    """(container restarts in its running pods under OnFailure, retried pod failures
    under ExitCode) of one replica: what the job's backoffLimit counts."""
    if batch_job is None:
        return 0, 0
    restart = restart_policy_of(batch_job)
    if restart is RestartPolicy.EXIT_CODE:
        failed = int((batch_job.get("status") or {}).get("failed") or 0)
        # The failure that ended a batch Job on a disruption is none (disruption.py).
        return 0, failed - (1 if failed and failed_by_disruption(batch_job) else 0)
    if restart is not RestartPolicy.ON_FAILURE:
        return 0, 0
    restarts = 0
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("phase") != "Running":
            continue
        for key in ("initContainerStatuses", "containerStatuses"):
            restarts += sum(int(c.get("restartCount") or 0) for c in status.get(key) or [])
    return restarts, 0


def replica_set_status(
    shape: JobShape, replica_type: ReplicaType, replicas: int, live: LiveObjects
) -> MxReplicaStatus:
    return _replica_set_status(replica_type, replicas, Replicas.of(shape, live))


def _replica_set_status(
    replica_type: ReplicaType, replicas: int, found: Replicas
) -> MxReplicaStatus:
    states, reasons = [], []
    for batch_job, replica_pods in found.replica_set(replica_type, replicas):
        state = replica_state(batch_job, replica_pods, found.events_of(batch_job))
        states.append(state)
        if state is ReplicaState.PENDING and replica_pods:
            reasons.append(pending_reason(newest_pod(replica_pods)))
    return aggregate(replica_type, replicas, states, next((r for r in reasons if r), ""))


def replicas_of(
    shape: JobShape, live: LiveObjects, found: Replicas | None = None
) -> list[tuple[ReplicaType, int, KubeObject | None, list[KubeObject], list[KubeObject]]]:
    """Every replica of the judged runtime: (type, index, its batch Job, its pods, the
    Events about its gone pods); `found` as `shape_status` takes it."""
    found = found or Replicas.of(shape, live)
    return [
        (replica_type, index, batch_job, pods, found.events_of(batch_job))
        for replica_type, count in shape.replicas.items()
        for index, (batch_job, pods) in enumerate(found.replica_set(replica_type, count))
    ]


@dataclass(frozen=True, slots=True)
class Replicas:
    """The batch Jobs and pods of one runtime by replica (its `job_type` label and
    task index), sorted out in one pass: looking each replica up in every object
    made a job's status quadratic in its replicas."""

    jobs: Mapping[tuple[str, int], KubeObject]  # the first one listed, if several
    pods: Mapping[tuple[str, int], list[KubeObject]]  # in the order listed
    events: Mapping[str, list[KubeObject]]  # about gone pods, by their batch Job's name

    @classmethod
    def of(cls, shape: JobShape, live: LiveObjects) -> Replicas:
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
        events: dict[str, list[KubeObject]] = {}
        for event in live.pod_events:  # a pod is named `{batch job}-{suffix}`
            involved = str((event.get("involvedObject") or {}).get("name") or "")
            events.setdefault(involved.rpartition("-")[0], []).append(event)
        return cls(jobs, pods, events)

    def events_of(self, batch_job: KubeObject | None) -> list[KubeObject]:
        """The Events about the gone pods of `batch_job`."""
        if batch_job is None:
            return []
        return self.events.get(str((batch_job.get("metadata") or {}).get("name")), [])

    def replica_set(
        self, replica_type: ReplicaType, replicas: int
    ) -> list[tuple[KubeObject | None, list[KubeObject]]]:
        """Each replica's batch Job and pods, by index."""
        label = replica_type.value
        return [
            (self.jobs.get((label, index)), self.pods.get((label, index), []))
            for index in range(replicas)
        ]


def restart_policy_of(batch_job: Mapping[str, Any]) -> RestartPolicy:
    """The replica's restart policy, as its batch Job records it; else as it was
    rendered (`ExitCode` is `Never` pods with a pod failure policy)."""
    recorded = objects.annotations_of(batch_job).get(RESTART_POLICY_ANNOTATION)
    if recorded in _RESTART_POLICIES:
        return _RESTART_POLICIES[recorded]
    spec = batch_job.get("spec") or {}
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    if pod_spec.get("restartPolicy") == RestartPolicy.ON_FAILURE.value:
        return RestartPolicy.ON_FAILURE
    rules = (spec.get("podFailurePolicy") or {}).get("rules") or []
    exit_codes = any(rule.get("onExitCodes") for rule in rules)
    return RestartPolicy.EXIT_CODE if exit_codes else RestartPolicy.NEVER


def replica_state(
    batch_job: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]] = (),
) -> ReplicaState:
    """One replica's state from its batch Job, that Job's pods and the Events about
    those of them that are gone."""
    if batch_job is None:
        return ReplicaState.UNKNOWN
    job_status_: Mapping[str, Any] = batch_job.get("status") or {}
    if int(job_status_.get("succeeded") or 0) >= 1:
        return ReplicaState.SUCCEEDED
    if own_eviction(batch_job, pods, events) is not None:
        return ReplicaState.FAILED  # evicted for its own use: it failed (disruption.py)
    if failed_by_disruption(batch_job) is not None:
        return ReplicaState.RUNNING  # runs again whole (disruption.py), not failed
    if any(
        c.get("type") == "Failed" and c.get("status") == "True"
        for c in job_status_.get("conditions") or []
    ):
        return ReplicaState.FAILED
    if (batch_job.get("spec") or {}).get("suspend"):
        return ReplicaState.SUSPENDED
    restart = restart_policy_of(batch_job)
    if restart is RestartPolicy.EXIT_CODE and _failed_for_good(pods):
        return ReplicaState.FAILED
    counted = int(job_status_.get("failed") or 0)
    retried = counted >= 1
    if (
        retried
        and restart is not RestartPolicy.EXIT_CODE
        and counts_as_failure(restart, pods, counted, events)
    ):
        return ReplicaState.FAILED  # a failed pod fails the job, even once replaced
    state = pod_replica_state(newest_pod(pods), restart) if pods else ReplicaState.PENDING
    if retried and state is ReplicaState.PENDING:
        return ReplicaState.RUNNING  # a retry on its way: the job goes on, as it did
    return state


def _failed_for_good(pods: Sequence[Mapping[str, Any]]) -> bool:
    """Under `ExitCode`: a failed pod whose `mxnet` container exited with a code the
    operator did not retry. 0 is one (a sidecar failed the pod): no pod failure policy
    can name it, so its batch Job retries it, but the job has failed, and the failed pod
    stays listed as long as its batch Job. Not a pod Kubernetes took away: its `mxnet`
    may well exit 0 on the SIGTERM (`disruption.py`)."""
    return any(
        (p.get("status") or {}).get("phase") == "Failed"
        and not is_disrupted(p)
        and (terminated := mxnet_terminated(p))
        and not is_retryable_termination(terminated)
        for p in pods
    )


def counts_as_failure(
    restart: RestartPolicy,
    pods: Sequence[Mapping[str, Any]],
    counted: int = 1,
    events: Sequence[Mapping[str, Any]] = (),
) -> bool:
    """Whether the failed pods its batch Job `counted` are the program's failure, not a
    disruption (`disruption.py`). Under `Never`, unless the failed pods kept all say
    Kubernetes took them away. Under `OnFailure`, whose program's exits restart in
    place, when a failed pod kept says nothing of the kind, or a pod counted is gone
    and no Event about a gone pod (`events`) says Kubernetes took it away: the pod
    garbage collector deletes failed pods, which a disruption does not make."""
    failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
    if any(not is_disrupted(p) for p in failed):
        return True
    if restart is RestartPolicy.NEVER:
        return not failed
    return counted > len(failed) and not any(map(event_disruption, events))


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
