"""Render the Kubernetes objects of one MxJob: a pure, deterministic function.

One batch/v1 Job per replica index (completions 1, parallelism 1), in replica
order, then the scheduler's Service. Nothing here talks to a cluster, reads a
clock or draws a random number: the same job and context always give the same
objects, byte for byte, which is what lets the planner compare and dry-run.

The user's pod template is deep-copied, never mutated. Onto the copy go our
labels (they win over the user's on a key collision: selection and status
depend on them), the replica's restart policy, the DMLC environment after the
user's own entries, and any accelerator volumes and env vars. User template
labels stay on the pod template only; the batch Job carries just ours.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mxgitops import objects
from mxgitops.objects import Kind, KubeObject, ObjectRef
from mxgitops.spec import (
    CONTAINER_NAME,
    MxJob,
    ReplicaSpec,
    ReplicaType,
    RestartPolicy,
    derived_names,
    job_object_name,
    scheduler_service_name,
)
from mxgitops.trainer.accelerators import AcceleratorConfig, apply_accelerators
from mxgitops.trainer.inplace import annotation as in_place_annotation
from mxgitops.trainer.labels import replica_labels, shape_annotations
from mxgitops.trainer.mxconfig import dmlc_envs

PS_ROOT_PORT_NAME = "ps-root-port"
# ExitCode (Kubeflow): 1-127 are the program's own verdict and fail the job at
# once; anything else (signals: 137, 143, ...) is retried within backoffLimit.
PERMANENT_EXIT_CODES = tuple(range(1, 128))


@dataclass(frozen=True)
class RenderContext:
    """What rendering needs besides the job: who owns the objects, from which commit."""

    instance: str
    commit: str = ""
    accelerators: Mapping[str, AcceleratorConfig] = field(default_factory=dict)
    # Kueue's WorkloadPriorityClasses in the cluster: a queued job's priority class is
    # given to Kueue by name only where one exists (else the pods' priorityClassName is).
    workload_priority_classes: frozenset[str] = frozenset()


def render_job(job: MxJob, ctx: RenderContext) -> list[KubeObject]:
    """Every object of the job: the batch Jobs in replica order, then the Service."""
    rendered: list[KubeObject] = []
    shared = _Shared.of(job, ctx)
    for replica in job.replica_specs:
        rendered += render_replica_jobs(job, replica, ctx, shared)
    if job.replica(ReplicaType.SCHEDULER) is not None:
        rendered.append(render_scheduler_service(job, ctx))
    return rendered


def job_refs(job: MxJob) -> list[ObjectRef]:
    """The refs of `render_job`'s objects, in its order, without rendering them: what a
    sync compares with the live objects of a job whose spec did not change."""
    refs = [ObjectRef(Kind.JOB, job.namespace, name) for _, name in derived_names(job)]
    if job.replica(ReplicaType.SCHEDULER) is not None:
        refs.append(ObjectRef(Kind.SERVICE, job.namespace, scheduler_service_name(job)))
    return refs


def render_replica_set(job: MxJob, replica: ReplicaSpec, ctx: RenderContext) -> list[KubeObject]:
    """The objects of one replica set: its batch Jobs, plus the Service for the scheduler."""
    rendered = render_replica_jobs(job, replica, ctx)
    if replica.type is ReplicaType.SCHEDULER:
        rendered.append(render_scheduler_service(job, ctx))
    return rendered


def render_replica_jobs(
    job: MxJob, replica: ReplicaSpec, ctx: RenderContext, shared: _Shared | None = None
) -> list[KubeObject]:
    """One replica set's batch Jobs (`shared`: its job's `_Shared`, when rendering them all)."""
    shared = shared or _Shared.of(job, ctx)
    return [render_batch_job(job, replica, index, ctx, shared) for index in range(replica.replicas)]


@dataclass(frozen=True)
class _Shared:
    """What every batch Job of one job shares, worked out once per job, not per replica."""

    annotations: dict[str, str]  # copied into each object: never handed out itself
    in_place: dict[str, str]
    run_policy: dict[str, Any]
    env: Callable[[ReplicaType, int], list[dict[str, str]]]

    @classmethod
    def of(cls, job: MxJob, ctx: RenderContext) -> _Shared:
        return cls(
            object_annotations(job, ctx), in_place_annotation(job), _run_policy(job), dmlc_envs(job)
        )


def render_batch_job(
    job: MxJob,
    replica: ReplicaSpec,
    index: int,
    ctx: RenderContext,
    shared: _Shared | None = None,
) -> KubeObject:
    """One replica's batch Job (`shared`: its job's `_Shared`, when rendering them all)."""
    shared = shared or _Shared.of(job, ctx)
    labels = dict(replica_labels(job, ctx.instance, replica.type, index))
    spec: dict[str, Any] = {"completions": 1, "parallelism": 1}
    spec.update(shared.run_policy)
    if replica.restart_policy is RestartPolicy.EXIT_CODE:
        spec["podFailurePolicy"] = {
            "rules": [
                {
                    "action": "FailJob",
                    "onExitCodes": {
                        "containerName": CONTAINER_NAME,
                        "operator": "In",
                        "values": list(PERMANENT_EXIT_CODES),
                    },
                }
            ]
        }
    spec["template"] = _pod_template(replica, index, labels, ctx, shared)
    metadata = _metadata(job_object_name(job, replica.type, index), job, labels, shared.annotations)
    metadata["annotations"].update(shared.in_place)  # the Job's, not its pods'
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def render_scheduler_service(job: MxJob, ctx: RenderContext) -> KubeObject:
    """The Service every process dials (DMLC_PS_ROOT_URI); it selects exactly the scheduler pod."""
    scheduler = job.replica(ReplicaType.SCHEDULER)
    if scheduler is None:
        raise ValueError(f"job {job.name} has no SCHEDULER replica set")
    labels = dict(replica_labels(job, ctx.instance, ReplicaType.SCHEDULER, 0))
    port = scheduler.ps_root_port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(
            scheduler_service_name(job), job, labels, object_annotations(job, ctx)
        ),
        "spec": {
            "selector": dict(labels),
            "ports": [
                {"name": PS_ROOT_PORT_NAME, "port": port, "targetPort": port, "protocol": "TCP"}
            ],
        },
    }


def object_annotations(job: MxJob, ctx: RenderContext) -> dict[str, str]:
    """Annotations on every object of the job (empty source or commit are left out)."""
    values = {
        objects.SPEC_HASH_ANNOTATION: job.spec_hash,
        objects.SOURCE_ANNOTATION: job.source_path,
        objects.COMMIT_ANNOTATION: ctx.commit,
        **shape_annotations(job),
    }
    return {key: value for key, value in values.items() if value}


def _metadata(
    name: str, job: MxJob, labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": job.namespace,
        "labels": labels,
        "annotations": dict(annotations),
    }


def _run_policy(job: MxJob) -> dict[str, Any]:
    policy = job.run_policy
    values: dict[str, Any] = {
        "activeDeadlineSeconds": policy.active_deadline_seconds,
        "backoffLimit": policy.backoff_limit,
        "ttlSecondsAfterFinished": policy.ttl_seconds_after_finished,
        "suspend": True if policy.suspend else None,
    }
    return {key: value for key, value in values.items() if value is not None}


def _pod_template(
    replica: ReplicaSpec, index: int, labels: dict[str, str], ctx: RenderContext, shared: _Shared
) -> dict[str, Any]:
    template: dict[str, Any] = _copied(dict(replica.template))
    metadata: dict[str, Any] = template.get("metadata") or {}
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
    metadata["annotations"] = {**(metadata.get("annotations") or {}), **shared.annotations}
    pod_spec: dict[str, Any] = template.get("spec") or {}
    restart = replica.restart_policy
    pod_spec["restartPolicy"] = (
        RestartPolicy.NEVER.value if restart is RestartPolicy.EXIT_CODE else restart.value
    )
    ours = shared.env(replica.type, index)
    for container in pod_spec.get("containers") or []:
        if container.get("name") == CONTAINER_NAME and ours:
            container["env"] = [*(container.get("env") or []), *ours]
    apply_accelerators(pod_spec, ctx.accelerators)
    return {"metadata": metadata, "spec": pod_spec}


def copied_template(value: Any) -> Any:
    """A deep copy of a pod template (`_copied`), for the other runtimes."""
    return _copied(value)


def _copied(value: Any) -> Any:
    """A deep copy of a template: its dicts and lists copied (all a manifest's YAML or
    JSON makes, besides scalars, which are immutable and shared); anything else by
    `copy.deepcopy`. Several times faster than deepcopy's memo for every node."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return copy.deepcopy(value)
