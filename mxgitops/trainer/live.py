"""Group an instance's live objects by job, and read each group back.

The planner pairs desired jobs with live ones by (namespace, name); this module
makes the live side. A group reports what was applied (spec hash, runtime id,
source) only when all its Jobs and Services agree: a group whose objects
disagree is half-replaced or hand-edited, and `None` tells the planner to
replace it rather than trust any one object. Pods are left out of that vote:
they are the Job controller's, and are deleted through their Job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mxgitops import objects
from mxgitops.objects import KubeObject, LiveObjects, ObjectRef
from mxgitops.spec import JobMode, ReplicaType, SuccessPolicy
from mxgitops.trainer.labels import (
    JOB_TYPE_LABEL,
    REPLICAS_ANNOTATION,
    RUNTIME_ID_LABEL,
    SUCCESS_POLICY_ANNOTATION,
    TASK_INDEX_LABEL,
    parse_replicas_annotation,
)
from mxgitops.trainer.status import JobShape, MxReplicaStatus, State, shape_status

BATCH_JOB_NAME_LABEL = "batch.kubernetes.io/job-name"  # set on pods by the Job controller


@dataclass(frozen=True)
class LiveJob:
    """The live objects of one job (any runtime) of one instance."""

    namespace: str
    name: str
    jobs: tuple[KubeObject, ...] = ()
    services: tuple[KubeObject, ...] = ()
    pods: tuple[KubeObject, ...] = ()

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
        shape = JobShape(
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
        return shape_status(shape, LiveObjects(self.jobs, self.services, self.pods))

    def _owned(self) -> tuple[KubeObject, ...]:
        return self.jobs + self.services

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
    """Live objects by (namespace, job name label); objects without that label are skipped."""
    groups: dict[tuple[str, str], dict[str, list[KubeObject]]] = {}
    for kind, items in (("jobs", live.jobs), ("services", live.services), ("pods", live.pods)):
        for obj in items:
            name = objects.labels_of(obj).get(objects.JOB_NAME_LABEL)
            if not name:
                continue
            namespace = str((obj.get("metadata") or {}).get("namespace") or "")
            group = groups.setdefault((namespace, name), {"jobs": [], "services": [], "pods": []})
            group[kind].append(obj)
    return {
        key: LiveJob(
            namespace=key[0],
            name=key[1],
            jobs=tuple(group["jobs"]),
            services=tuple(group["services"]),
            pods=tuple(group["pods"]),
        )
        for key, group in sorted(groups.items())
    }


def _agreed(values: Iterable[str | None]) -> str | None:
    distinct = set(values)
    if len(distinct) != 1:
        return None
    return distinct.pop()


def _pod_job_name(job_name: str, pod: KubeObject) -> str:
    """The batch Job a pod of ours belongs to: the Job controller's label, else rebuilt
    from our labels the way `spec.job_object_name` builds it."""
    labels = objects.labels_of(pod)
    controller_label = labels.get(BATCH_JOB_NAME_LABEL) or labels.get("job-name")
    if controller_label:
        return controller_label
    role = labels.get(JOB_TYPE_LABEL, "").lower()
    runtime_id, index = labels.get(RUNTIME_ID_LABEL, ""), labels.get(TASK_INDEX_LABEL, "")
    return f"{job_name}-{role}-{runtime_id}-{index}"
