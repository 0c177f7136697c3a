"""Group an instance's live objects by job, and read each group back.

The planner pairs desired jobs with live ones by (namespace, name); this module
makes the live side. A group reports what was applied (spec hash, runtime id,
source) only when all its Jobs and Services agree: a group whose objects
disagree is half-replaced, and `None` tells the planner to replace it rather
than trust any one object. Pods are left out of that vote: they are the Job
controller's, and are deleted through their Job.

Which job an object belongs to rests on its name, which nobody can edit
(`{job}-{type}-{runtimeId}-{index}`), cross-checked with everything a hand
can edit: the `mxgitops.io/job`, `job_type`, `runtime_id` and `task_index`
labels, and the spec-hash annotation, from which the runtime id derives. An
object whose parts do not add up is a `Stray` of the job its name names: it
is neither counted, nor deleted, nor created again, only reported, so a moved
or removed label never restarts another job or makes every sync write (`ownership.py`).

A sync plans thousands of jobs, and most of its planning is reading them back,
so each reading is done once: a `LiveJob` keeps what it has read of its objects,
a job's objects are sorted to their replicas in one pass (`status.py`), each
distinct replicas annotation is parsed once per job, and a spec hash yields its
runtime once for all the objects that carry it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from mxgitops import objects
from mxgitops.model import (
    ON_CHANGE_ANNOTATION,
    JobMode,
    MxJob,
    OnChange,
    ReplicaType,
    RestartPolicy,
    SuccessPolicy,
)
from mxgitops.objects import KubeObject, LiveObjects, ObjectRef
from mxgitops.runtimes.batch.failure import backoff_failure, replica_failure
from mxgitops.runtimes.batch.inplace import compare as compare_in_place
from mxgitops.runtimes.batch.inplace import recorded_backoff_limit
from mxgitops.runtimes.batch.ownership import OBJECT_NAME, identity
from mxgitops.runtimes.batch.status import (
    JobShape,
    Replicas,
    counts_as_failure,
    replicas_of,
    restart_policy_of,
    shape_status,
)
from mxgitops.runtimes.shared.base import Stray
from mxgitops.runtimes.shared.disruption import (
    BATCH_JOB_NAME_LABEL,
    Disruption,
    first_disruption,
    replaced,
)
from mxgitops.runtimes.shared.failure import Failure
from mxgitops.runtimes.shared.inplace import InPlace
from mxgitops.runtimes.shared.labels import (
    JOB_TYPE_LABEL,
    REPLICA_TYPES,
    REPLICAS_ANNOTATION,
    RUNTIME_ID_LABEL,
    SUCCESS_POLICY_ANNOTATION,
    TASK_INDEX_LABEL,
    parse_replicas_annotation,
)
from mxgitops.runtimes.shared.pods import newest_pod
from mxgitops.runtimes.shared.reruns import recorded
from mxgitops.runtimes.shared.state import MxReplicaStatus, State

_ALL_WORKERS = SuccessPolicy.ALL_WORKERS.value


@dataclass(frozen=True)
class LiveJob:
    """The live objects of one job (any runtime) of one instance.

    What is read back from them (spec hash, runtime, shape, status) is read once
    per job and kept (`cached_property`): the planner asks for it several times,
    and a sync plans thousands of jobs.
    """

    namespace: str
    name: str
    jobs: tuple[KubeObject, ...] = ()
    services: tuple[KubeObject, ...] = ()
    pods: tuple[KubeObject, ...] = ()
    strays: tuple[Stray, ...] = ()  # named as this job's, but not adding up: left alone
    pod_events: tuple[KubeObject, ...] = ()  # how its gone pods were taken away

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def has_objects(self) -> bool:
        """Whether any of its Jobs and Services is left (pods alone are no job)."""
        return bool(self.jobs or self.services)

    def on_change(self) -> OnChange:
        """What its objects say a change waits for (a job whose manifest is gone too)."""
        values = {objects.annotations_of(o).get(ON_CHANGE_ANNOTATION) for o in self._owned()}
        return OnChange.WAIT if OnChange.WAIT.value in values else OnChange.REPLACE

    def compare_in_place(self, job: MxJob) -> list[InPlace]:
        """The patches that bring its live objects to `job`'s manifest (`inplace.py`)."""
        return compare_in_place(job, self.jobs, self.services)

    @cached_property
    def spec_hash(self) -> str | None:
        """The spec hash all Jobs and Services carry; None if any differs or lacks it."""
        return _agreed(
            objects.annotations_of(o).get(objects.SPEC_HASH_ANNOTATION) for o in self._owned()
        )

    @cached_property
    def runtime_id(self) -> str | None:
        return _agreed(objects.labels_of(o).get(RUNTIME_ID_LABEL) for o in self._owned())

    @cached_property
    def source(self) -> str | None:
        return _agreed(
            objects.annotations_of(o).get(objects.SOURCE_ANNOTATION) for o in self._owned()
        )

    @cached_property
    def commit(self) -> str | None:
        """The commit that submitted the objects (their commit annotation), if all agree."""
        return _agreed(
            objects.annotations_of(o).get(objects.COMMIT_ANNOTATION) for o in self._owned()
        )

    def refs(self) -> list[ObjectRef]:
        """What deleting the job deletes: its Jobs and Services, sorted.

        Pods go with their Job (the cluster deletes Jobs with propagation).
        """
        return list(self._refs)

    def has(self, ref: ObjectRef) -> bool:
        """Whether `ref` is one of its Jobs and Services."""
        return (ref.kind, ref.namespace, ref.name) in self._ref_keys

    @cached_property
    def _ref_keys(self) -> frozenset[tuple[str, str, str]]:
        """(kind, namespace, name) of its Jobs and Services, as `ObjectRef.of` reads them:
        plain text, hashed and compared in C, where a set of ObjectRefs would be built,
        hashed and compared in Python for every job that renders what is there."""
        return frozenset(
            (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
            for o in self._owned()
        )

    @cached_property
    def _refs(self) -> tuple[ObjectRef, ...]:
        return tuple(sorted((ObjectRef.of(o) for o in self._owned()), key=ObjectRef.sort_key))

    def refs_of(self, spec_hash: str) -> list[ObjectRef]:
        """The Jobs and Services applied from the spec `spec_hash`, sorted."""
        return sorted(
            ObjectRef.of(o)
            for o in self._owned()
            if objects.annotations_of(o).get(objects.SPEC_HASH_ANNOTATION) == spec_hash
        )

    def incomplete(self) -> str | None:
        """Why these objects cannot be a whole running job, or None.

        Without any batch Job (a replace or prune interrupted after its Jobs went,
        leaving the Service) nothing runs. Batch Jobs missing from the replicas the
        objects declare were deleted, by an interrupted sync or by hand, unless
        the ttlSecondsAfterFinished an earlier version set on each removed them.
        """
        if not self.jobs:
            return "no batch Job is left" + "".join(f", only {r}" for r in self.refs()[:1])
        if self.runtime_id is None:
            return "its objects are of several runtimes (a replace was interrupted)"
        if any((j.get("spec") or {}).get("ttlSecondsAfterFinished") is not None for j in self.jobs):
            return None
        present = {(o.get("metadata") or {}).get("name") for o in self.jobs}
        missing = sorted(
            name
            for replica_type, count in self._declared_replicas().items()
            for index in range(count)
            if (name := f"{self.name}-{replica_type.role}-{self.runtime_id}-{index}") not in present
        )
        if not missing:
            return None
        more = ", ..." if len(missing) > 3 else ""
        return f"{len(missing)} of its batch Jobs are gone ({', '.join(missing[:3])}{more})"

    def unfinished_job_refs(self) -> list[ObjectRef]:
        """Batch Jobs without a Complete or Failed condition whose pod has not succeeded:
        their pods still run or wait. A Job of one completion whose pod succeeded is done
        though its Complete condition may come seconds later: the kubelet writes the
        Succeeded phase only once it tore the pod's sandbox down, after its containers'
        exit 0, and the job controller counts the pod after that. Deleting it would take
        the pod a sync just read, its log and its times, for nothing."""
        succeeded = {_pod_job_name(self.name, p) for p in self.pods if _succeeded(p)}
        return sorted(
            ObjectRef.of(j)
            for j in self.jobs
            if not _finished(j) and (j.get("metadata") or {}).get("name") not in succeeded
        )

    def finished_replicas(self) -> list[ObjectRef]:
        """The batch Jobs of replicas that finished (`runpolicy.finished_while_suspended`:
        made anew so that a suspended job resumes whole)."""
        return sorted(ObjectRef.of(j) for j in self.jobs if _finished(j))

    def orphan_pod_refs(self) -> list[ObjectRef]:
        """Pods whose batch Job is gone (deleted with orphan propagation, by hand)."""
        job_names = {(o.get("metadata") or {}).get("name") for o in self.jobs}
        return sorted(
            ObjectRef.of(p) for p in self.pods if _pod_job_name(self.name, p) not in job_names
        )

    def status(self) -> tuple[State, list[MxReplicaStatus]]:
        """The job's state by the same rules as `job_status`, from live objects alone.

        Expected replicas per type: the largest count any object's replicas
        annotation states, or one more than the largest task_index seen if that
        is larger. A dist job is one with any SCHEDULER or SERVER. If the
        runtimes disagree, the newest Job's runtime is judged.
        """
        state, replicas = self._status
        return state, list(replicas)

    @cached_property
    def _status(self) -> tuple[State, tuple[MxReplicaStatus, ...]]:
        state, replicas = shape_status(self._shape, self._objects(), self._replicas)
        return state, tuple(replicas)

    def training_pods(self) -> tuple[Mapping[str, Any] | None, tuple[KubeObject, ...]]:
        """Worker 0's newest pod and the pods of the judged runtime (`Live`'s)."""
        shape = self._shape
        run = tuple(
            p for p in self.pods if objects.labels_of(p).get(RUNTIME_ID_LABEL) == shape.runtime_id
        )
        for replica_type, index, _, pods, _ in replicas_of(shape, self._objects(), self._replicas):
            if replica_type is ReplicaType.WORKER and index == 0 and pods:
                return newest_pod(pods), run
        return None, run

    @cached_property
    def _replicas(self) -> Replicas:
        """Its objects sorted to the judged runtime's replicas, once for every reading."""
        return Replicas.of(self._shape, self._objects())

    def placement(self) -> str:
        """Batch Jobs run where they are made: never on another cluster."""
        return ""

    def queue(self) -> str:
        """None: a job that names a queue runs on the runtime Kueue admits (JobSet)."""
        return ""

    def unreachable(self) -> str:
        """Never: they run on the cluster mxgitops reads (`placement`)."""
        return ""

    def failure(self) -> Failure | None:
        """Why the judged runtime failed: its first failed replica's account, or None."""
        for replica_type, index, batch_job, pods, events in replicas_of(
            self._shape, self._objects(), self._replicas
        ):
            failure = replica_failure(f"{replica_type.value} {index}", batch_job, pods, events)
            if failure is not None:
                return failure
        return backoff_failure(self._shape, self._objects())

    def disruption(self) -> Disruption | None:
        """A dist job that Kubernetes disrupted (`disruption.py`), which the planner runs
        again whole: a lone new pod cannot rejoin a running ps-lite job. A local job's
        batch Job makes its new pod itself: None."""
        if self._shape.mode is not JobMode.DIST:
            return None
        return first_disruption(
            (
                f"{replica_type.value} {index}",
                batch_job,
                pods,
                _lost_pod(batch_job, pods, events),
                events,
            )
            for replica_type, index, batch_job, pods, events in replicas_of(
                self._shape, self._objects(), self._replicas
            )
        )

    def disruptions(self) -> tuple[str, ...]:
        """The disruptions this spec met in a row, each run again since (`reruns.py`): as
        its objects record them, and a local job's disrupted pods that its batch Job
        replaced (a dist job's are the disruption the planner runs it again for)."""
        earlier = recorded(self._owned())
        if self._shape.mode is JobMode.DIST:
            return earlier
        return earlier + tuple(
            said
            for replica_type, index, _, pods, _ in replicas_of(
                self._shape, self._objects(), self._replicas
            )
            for said in replaced(f"{replica_type.value} {index}", pods)
        )

    def _objects(self) -> LiveObjects:
        return LiveObjects(self.jobs, self.services, self.pods, pod_events=self.pod_events)

    @cached_property
    def _shape(self) -> JobShape:
        """The judged runtime's shape, read in one pass over its objects."""
        runtime_id = self.runtime_id or self._newest_runtime()
        indexed: dict[str, int] = {}  # one more than the largest task_index, by job_type
        declared: set[str] = set()  # every object of a runtime says the same: parsed once
        policies: set[str] = set()
        for obj in (*self.jobs, *self.services, *self.pods):
            metadata = obj.get("metadata") or {}
            labels = metadata.get("labels") or {}
            if labels.get(RUNTIME_ID_LABEL) != runtime_id:
                continue
            annotations = metadata.get("annotations") or {}
            declared.add(annotations.get(REPLICAS_ANNOTATION, ""))
            policies.add(annotations.get(SUCCESS_POLICY_ANNOTATION, ""))
            type_label, index = labels.get(JOB_TYPE_LABEL, ""), labels.get(TASK_INDEX_LABEL, "")
            if type_label in REPLICA_TYPES and index.isdigit():
                indexed[type_label] = max(indexed.get(type_label, 0), int(index) + 1)
        backoff_limit = next(
            (
                limit
                for job in self.jobs
                if objects.labels_of(job).get(RUNTIME_ID_LABEL) == runtime_id
                and (limit := recorded_backoff_limit(job)) is not None
            ),
            None,
        )
        counts = _most_replicas(declared)
        replicas = {
            replica_type: max(counts.get(replica_type, 0), indexed.get(type_label, 0))
            for type_label, replica_type in REPLICA_TYPES.items()
            if replica_type in counts or type_label in indexed
        }
        return JobShape(
            namespace=self.namespace,
            name=self.name,
            runtime_id=runtime_id or "",
            mode=JobMode.LOCAL if set(replicas) <= {ReplicaType.WORKER} else JobMode.DIST,
            success_policy=(
                SuccessPolicy.ALL_WORKERS if _ALL_WORKERS in policies else SuccessPolicy.SCHEDULER
            ),
            replicas=replicas,
            backoff_limit=backoff_limit,
        )

    @cached_property
    def created(self) -> str:
        return objects.first_created(self._owned())

    def _owned(self) -> tuple[KubeObject, ...]:
        return self.jobs + self.services

    def _declared_replicas(self) -> dict[ReplicaType, int]:
        return _most_replicas(
            {objects.annotations_of(o).get(REPLICAS_ANNOTATION, "") for o in self._owned()}
        )

    def _newest_runtime(self) -> str | None:
        def key(obj: Mapping[str, Any]) -> tuple[str, str]:
            metadata = obj.get("metadata") or {}
            return (str(metadata.get("creationTimestamp") or ""), str(metadata.get("name") or ""))

        candidates = self.jobs or self.services or self.pods
        if not candidates:
            return None
        return objects.labels_of(max(candidates, key=key)).get(RUNTIME_ID_LABEL)


def _lost_pod(
    batch_job: KubeObject | None,
    pods: tuple[KubeObject, ...] | list[KubeObject],
    events: list[KubeObject],
) -> bool:
    """An `OnFailure` replica's batch Job counted a failed pod that is gone, and an Event
    about it says Kubernetes took it away (`status.counts_as_failure`)."""
    if batch_job is None or restart_policy_of(batch_job) is not RestartPolicy.ON_FAILURE:
        return False
    counted = int((batch_job.get("status") or {}).get("failed") or 0)
    return counted >= 1 and not counts_as_failure(RestartPolicy.ON_FAILURE, pods, counted, events)


def _most_replicas(annotations: Iterable[str]) -> dict[ReplicaType, int]:
    """The largest count of each replica type any of these replicas annotations states."""
    counts: dict[ReplicaType, int] = {}
    for value in annotations:
        for replica_type, count in parse_replicas_annotation(value).items():
            counts[replica_type] = max(counts.get(replica_type, 0), count)
    return counts


def _finished(batch_job: Mapping[str, Any]) -> bool:
    conditions = (batch_job.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions
    )


def group_live(live: LiveObjects) -> dict[tuple[str, str], LiveJob]:
    """Live objects by (namespace, job): Jobs and Services by what their name and labels
    agree on (else as strays of the job their name names), pods by their batch Job."""
    groups: dict[tuple[str, str], dict[str, list[Any]]] = {}

    def group_of(namespace: str, name: str) -> dict[str, list[Any]]:
        group = groups.get((namespace, name))
        if group is None:
            group = groups[(namespace, name)] = {
                "jobs": [],
                "services": [],
                "pods": [],
                "strays": [],
                "pod_events": [],
            }
        return group

    for kind, items in (("jobs", live.jobs), ("services", live.services)):
        for obj in items:
            name, why = identity(obj)
            if name is None:
                continue
            group = group_of(_namespace(obj), name)
            if why is None:
                group[kind].append(obj)
            else:
                group["strays"].append(Stray(ObjectRef.of(obj), why))
    for pod in live.pods:
        match = OBJECT_NAME.fullmatch(_controller_job_name(pod))
        name = match["job"] if match else objects.labels_of(pod).get(objects.JOB_NAME_LABEL)
        if name:
            group_of(_namespace(pod), name)["pods"].append(pod)
    for event in live.pod_events:  # a gone pod was named `{batch job}-{suffix}`
        match = OBJECT_NAME.fullmatch(_involved(event).rpartition("-")[0])
        if match and (_namespace(event), match["job"]) in groups:
            groups[(_namespace(event), match["job"])]["pod_events"].append(event)
    return {
        key: LiveJob(
            namespace=key[0],
            name=key[1],
            jobs=tuple(group["jobs"]),
            services=tuple(group["services"]),
            pods=tuple(group["pods"]),
            strays=tuple(group["strays"]),
            pod_events=tuple(group["pod_events"]),
        )
        for key, group in sorted(groups.items())
    }


def _involved(event: KubeObject) -> str:
    """The name of the object an Event (core/v1) is about."""
    return str((event.get("involvedObject") or {}).get("name") or "")


def _namespace(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def _succeeded(pod: KubeObject) -> bool:
    """The pod succeeded, or will as soon as the kubelet says so: every container
    exited 0."""
    status = pod.get("status") or {}
    if status.get("phase") == "Succeeded":
        return True
    containers = status.get("containerStatuses") or []
    return bool(containers) and all(
        ((c.get("state") or {}).get("terminated") or {}).get("exitCode") == 0 for c in containers
    )


def _controller_job_name(pod: KubeObject) -> str:
    labels = objects.labels_of(pod)
    return labels.get(BATCH_JOB_NAME_LABEL) or labels.get("job-name") or ""


def _agreed(values: Iterable[str | None]) -> str | None:
    distinct = set(values)
    if len(distinct) != 1:
        return None
    return distinct.pop()


def _pod_job_name(job_name: str, pod: KubeObject) -> str:
    """The batch Job a pod of ours belongs to: the Job controller's label, else rebuilt
    from our labels the way `spec.job_object_name` builds it."""
    controller_label = _controller_job_name(pod)
    if controller_label:
        return controller_label
    labels = objects.labels_of(pod)
    role = labels.get(JOB_TYPE_LABEL, "").lower()
    runtime_id, index = labels.get(RUNTIME_ID_LABEL, ""), labels.get(TASK_INDEX_LABEL, "")
    return f"{job_name}-{role}-{runtime_id}-{index}"
