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
or removed label never restarts another job or makes every sync write.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mxgitops import objects
from mxgitops.model import RUNTIME_ID_LENGTH, runtime_id_of
from mxgitops.objects import KubeObject, LiveObjects, ObjectRef
from mxgitops.spec import JobMode, ReplicaType, SuccessPolicy
from mxgitops.trainer.failure import Failure, replica_failure
from mxgitops.trainer.labels import (
    JOB_TYPE_LABEL,
    REPLICAS_ANNOTATION,
    RUNTIME_ID_LABEL,
    SUCCESS_POLICY_ANNOTATION,
    TASK_INDEX_LABEL,
    parse_replicas_annotation,
)
from mxgitops.trainer.status import JobShape, MxReplicaStatus, State, replicas_of, shape_status

BATCH_JOB_NAME_LABEL = "batch.kubernetes.io/job-name"  # set on pods by the Job controller
_ROLES = {t.role: t for t in ReplicaType}
_OBJECT_NAME = re.compile(
    rf"(?P<job>.+)-(?P<role>{'|'.join(_ROLES)})-(?P<rid>[0-9a-z]{{{RUNTIME_ID_LENGTH}}})"
    r"-(?P<index>0|[1-9][0-9]*)"
)
_SPEC_HASH = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Stray:
    """An object of ours whose name, labels and spec hash do not add up (hand-edited)."""

    ref: ObjectRef
    why: str

    def __str__(self) -> str:
        return f"{self.ref.kind.lower()}/{self.ref.name} ({self.why})"


@dataclass(frozen=True)
class LiveJob:
    """The live objects of one job (any runtime) of one instance."""

    namespace: str
    name: str
    jobs: tuple[KubeObject, ...] = ()
    services: tuple[KubeObject, ...] = ()
    pods: tuple[KubeObject, ...] = ()
    strays: tuple[Stray, ...] = ()  # named as this job's, but not adding up: left alone

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def spec_hash(self) -> str | None:
        """The spec hash all Jobs and Services carry; None if any differs or lacks it."""
        return _agreed(
            objects.annotations_of(o).get(objects.SPEC_HASH_ANNOTATION) for o in self._owned()
        )

    @property
    def runtime_id(self) -> str | None:
        return _agreed(objects.labels_of(o).get(RUNTIME_ID_LABEL) for o in self._owned())

    @property
    def source(self) -> str | None:
        return _agreed(
            objects.annotations_of(o).get(objects.SOURCE_ANNOTATION) for o in self._owned()
        )

    def refs(self) -> list[ObjectRef]:
        """What deleting the job deletes: its Jobs and Services, sorted.

        Pods go with their Job (the cluster deletes Jobs with propagation).
        """
        return sorted(ObjectRef.of(o) for o in self._owned())

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
        ttlSecondsAfterFinished removed them once their replica finished.
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
        """Batch Jobs without a Complete or Failed condition: their pods still run or wait."""
        return sorted(ObjectRef.of(j) for j in self.jobs if not _finished(j))

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
        return shape_status(self._shape(), self._objects())

    def failure(self) -> Failure | None:
        """Why the judged runtime failed: its first failed replica's account, or None."""
        for replica_type, index, batch_job, pods in replicas_of(self._shape(), self._objects()):
            failure = replica_failure(f"{replica_type.value} {index}", batch_job, pods)
            if failure is not None:
                return failure
        return None

    def _objects(self) -> LiveObjects:
        return LiveObjects(self.jobs, self.services, self.pods)

    def _shape(self) -> JobShape:
        runtime_id = self.runtime_id or self._newest_runtime()
        every = [*self.jobs, *self.services, *self.pods]
        ours = [o for o in every if objects.labels_of(o).get(RUNTIME_ID_LABEL) == runtime_id]
        replicas: dict[ReplicaType, int] = {}
        for obj in ours:
            declared = parse_replicas_annotation(
                objects.annotations_of(obj).get(REPLICAS_ANNOTATION, "")
            )
            for replica_type, count in declared.items():
                replicas[replica_type] = max(replicas.get(replica_type, 0), count)
            labels = objects.labels_of(obj)
            type_name, index = labels.get(JOB_TYPE_LABEL, ""), labels.get(TASK_INDEX_LABEL, "")
            if type_name in ReplicaType.__members__ and index.isdigit():
                replica_type = ReplicaType(type_name)
                replicas[replica_type] = max(replicas.get(replica_type, 0), int(index) + 1)
        policies = {objects.annotations_of(o).get(SUCCESS_POLICY_ANNOTATION, "") for o in ours}
        return JobShape(
            namespace=self.namespace,
            name=self.name,
            runtime_id=runtime_id or "",
            mode=JobMode.LOCAL if set(replicas) <= {ReplicaType.WORKER} else JobMode.DIST,
            success_policy=(
                SuccessPolicy.ALL_WORKERS
                if SuccessPolicy.ALL_WORKERS.value in policies
                else SuccessPolicy.SCHEDULER
            ),
            replicas={t: replicas[t] for t in ReplicaType if t in replicas},
        )

    def _owned(self) -> tuple[KubeObject, ...]:
        return self.jobs + self.services

    def _declared_replicas(self) -> dict[ReplicaType, int]:
        counts: dict[ReplicaType, int] = {}
        for obj in self._owned():
            declared = objects.annotations_of(obj).get(REPLICAS_ANNOTATION, "")
            for replica_type, count in parse_replicas_annotation(declared).items():
                counts[replica_type] = max(counts.get(replica_type, 0), count)
        return counts

    def _newest_runtime(self) -> str | None:
        def key(obj: Mapping[str, Any]) -> tuple[str, str]:
            metadata = obj.get("metadata") or {}
            return (str(metadata.get("creationTimestamp") or ""), str(metadata.get("name") or ""))

        candidates = self.jobs or self.services or self.pods
        if not candidates:
            return None
        return objects.labels_of(max(candidates, key=key)).get(RUNTIME_ID_LABEL)


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
        empty: dict[str, list[Any]] = {"jobs": [], "services": [], "pods": [], "strays": []}
        return groups.setdefault((namespace, name), empty)

    for kind, items in (("jobs", live.jobs), ("services", live.services)):
        for obj in items:
            name, why = _identity(obj)
            if name is None:
                continue
            group = group_of(_namespace(obj), name)
            if why is None:
                group[kind].append(obj)
            else:
                group["strays"].append(Stray(ObjectRef.of(obj), why))
    for pod in live.pods:
        match = _OBJECT_NAME.fullmatch(_controller_job_name(pod))
        name = match["job"] if match else objects.labels_of(pod).get(objects.JOB_NAME_LABEL)
        if name:
            group_of(_namespace(pod), name)["pods"].append(pod)
    return {
        key: LiveJob(
            namespace=key[0],
            name=key[1],
            jobs=tuple(group["jobs"]),
            services=tuple(group["services"]),
            pods=tuple(group["pods"]),
            strays=tuple(group["strays"]),
        )
        for key, group in sorted(groups.items())
    }


def _identity(obj: KubeObject) -> tuple[str | None, str | None]:
    """The job an object's name says it belongs to, and why its labels or spec hash
    disagree (None when everything adds up). An object whose name is none of ours
    belongs to the job its label names, as a stray; without that label, to none."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    labels = objects.labels_of(obj)
    match = _OBJECT_NAME.fullmatch(name)
    if match is None:
        return labels.get(objects.JOB_NAME_LABEL), "its name is not one mxgitops gives"
    expected = {
        objects.JOB_NAME_LABEL: match["job"],
        JOB_TYPE_LABEL: _ROLES[match["role"]].value,
        RUNTIME_ID_LABEL: match["rid"],
        TASK_INDEX_LABEL: match["index"],
    }
    wrong = [
        f"label {key} is {_shown(labels.get(key))}, its name says {value}"
        for key, value in expected.items()
        if labels.get(key) != value
    ]
    spec_hash = objects.annotations_of(obj).get(objects.SPEC_HASH_ANNOTATION, "")
    if not _SPEC_HASH.fullmatch(spec_hash) or runtime_id_of(spec_hash) != match["rid"]:
        wrong.append(f"annotation {objects.SPEC_HASH_ANNOTATION} is not of runtime {match['rid']}")
    return match["job"], "; ".join(wrong) or None


def _shown(value: str | None) -> str:
    return "missing" if value is None else repr(value)


def _namespace(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


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
