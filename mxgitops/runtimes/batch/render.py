"""Render the Kubernetes objects of one MxJob: a pure, deterministic function.

One batch/v1 Job per replica index (completions 1, parallelism 1), in replica
order, then (dist jobs) the job's headless Service, which gives every pod a DNS
name (`mxconfig.py`). Nothing here talks to a cluster, reads a
clock or draws a random number: the same job and context always give the same
objects, byte for byte, which is what lets the planner compare and dry-run.

The user's pod template is deep-copied, never mutated. Onto the copy go our
labels (they win over the user's on a key collision: selection and status
depend on them), the replica's restart policy, the pod's hostname and
subdomain, the DMLC environment after the user's own entries on every
container, and any accelerator volumes and env vars. Each batch Job's
in-place fields (deadline, backoffLimit, suspend) are `inplace.rendered`'s: backoffLimit
follows its replica's restart policy (`inplace.batch_backoff_limit`;
the failure semantics are `status.py`'s). User template
labels stay on the pod template only; the batch Job carries just ours.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mxgitops.model import (
    CONTAINER_NAME,
    KUBEFLOW_PORT_NAME,
    JobMode,
    MxJob,
    ReplicaSpec,
    ReplicaType,
    RestartPolicy,
    derived_names,
    job_object_name,
    scheduler_service_name,
)
from mxgitops.objects import Kind, KubeObject, ObjectRef
from mxgitops.runtimes.batch.inplace import annotation as in_place_annotation
from mxgitops.runtimes.batch.inplace import rendered as in_place_fields
from mxgitops.runtimes.shared.accelerators import apply_accelerators
from mxgitops.runtimes.shared.labels import (
    RESTART_POLICY_ANNOTATION,
    job_labels,
    kubeflow_pod_labels,
    replica_labels,
)
from mxgitops.runtimes.shared.mxconfig import dmlc_envs, hostname, service_name
from mxgitops.runtimes.shared.pods import PERMANENT_EXIT_CODES as PERMANENT_EXIT_CODES
from mxgitops.runtimes.shared.podtemplate import (
    RenderContext,
    copied_template,
    object_annotations,
    pod_failure_policy,
)

PS_ROOT_PORT_NAME = "ps-root-port"


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
    env: Callable[[ReplicaType, int], list[dict[str, str]]]

    @classmethod
    def of(cls, job: MxJob, ctx: RenderContext) -> _Shared:
        return cls(object_annotations(job, ctx), in_place_annotation(job), dmlc_envs(job))


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
    spec.update(in_place_fields(job, replica.restart_policy))
    spec.update(pod_failure_policy(replica.restart_policy, dist=job.mode is JobMode.DIST))
    spec["template"] = _pod_template(job, replica, index, labels, ctx, shared)
    metadata = _metadata(job_object_name(job, replica.type, index), job, labels, shared.annotations)
    metadata["annotations"].update(shared.in_place)  # the Job's, not its pods'
    metadata["annotations"][RESTART_POLICY_ANNOTATION] = replica.restart_policy.value
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def render_scheduler_service(job: MxJob, ctx: RenderContext) -> KubeObject:
    """The job's headless Service: every pod's subdomain, so `{hostname}.{service}`
    resolves to that pod (every MX_CONFIG address, DMLC_PS_ROOT_URI). It keeps the
    scheduler batch Job's name and labels (what identifies it as this job's, as the
    scheduler's ClusterIP Service it replaces had them) and selects every pod of the
    runtime. Headless: no service IP is taken. Not-ready pods are published too: a
    process dials its peers as it starts, before any readiness probe passed."""
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
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": dict(job_labels(job, ctx.instance)),
            "ports": [
                {"name": PS_ROOT_PORT_NAME, "port": port, "targetPort": port, "protocol": "TCP"}
            ],
        },
    }


def _metadata(
    name: str, job: MxJob, labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": job.namespace,
        "labels": labels,
        "annotations": dict(annotations),
    }


def _pod_template(
    job: MxJob,
    replica: ReplicaSpec,
    index: int,
    labels: dict[str, str],
    ctx: RenderContext,
    shared: _Shared,
) -> dict[str, Any]:
    template: dict[str, Any] = copied_template(dict(replica.template))
    metadata: dict[str, Any] = template.get("metadata") or {}
    kubeflow = kubeflow_pod_labels(job, replica.type, index)
    metadata["labels"] = {**(metadata.get("labels") or {}), **kubeflow, **labels}
    metadata["annotations"] = {**(metadata.get("annotations") or {}), **shared.annotations}
    pod_spec: dict[str, Any] = template.get("spec") or {}
    restart = replica.restart_policy
    pod_spec["restartPolicy"] = (
        RestartPolicy.NEVER.value if restart is RestartPolicy.EXIT_CODE else restart.value
    )
    pod_spec["hostname"] = hostname(job, replica.type, index)
    subdomain = service_name(job)
    if subdomain:
        pod_spec["subdomain"] = subdomain
    _default_port(pod_spec, replica.ps_root_port)
    ours = shared.env(replica.type, index)  # fresh entries: the first container takes them
    containers = [c for c in pod_spec.get("containers") or [] if isinstance(c, dict)]
    for number, container in enumerate(containers):  # every one: a sidecar reads them too
        entries = ours if number == 0 else copied_template(ours)
        container["env"] = [*(container.get("env") or []), *entries]
    apply_accelerators(pod_spec, ctx.accelerators)
    return {"metadata": metadata, "spec": pod_spec}


def _default_port(pod_spec: dict[str, Any], port: int) -> None:
    """Kubeflow's operators gave the `mxnet` container a port named mxjob-port when it
    had none (the replica's port, DMLC_PS_ROOT_PORT's for the scheduler): so does
    mxgitops, in every dialect, so that a manifest and its conversion run alike."""
    for container in pod_spec.get("containers") or []:
        if not isinstance(container, dict) or container.get("name") != CONTAINER_NAME:
            continue
        ports = container.get("ports") or []
        if not any(isinstance(p, dict) and p.get("name") == KUBEFLOW_PORT_NAME for p in ports):
            entry = {"name": KUBEFLOW_PORT_NAME, "containerPort": port, "protocol": "TCP"}
            container["ports"] = [*ports, entry]
