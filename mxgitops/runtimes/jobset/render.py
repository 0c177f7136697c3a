"""Render one MxJob as one JobSet (jobset.x-k8s.io/v1alpha2): a pure, deterministic function.

One replicatedJob per role, in replica order (`scheduler`, `server`, `worker`), each
one Indexed batch Job (replicas 1) of as many pods as the role has replicas. The
scheduler is addressed by its pod's stable DNS name, `{jobset}-scheduler-0-0.{jobset}`
(JobSet's headless Service of `network.subdomain`, not-ready addresses published), so
no ClusterIP Service is made; servers and workers `dependsOn` the scheduler being Ready.
The job succeeds when its deciding role succeeds (the scheduler, or the workers of a
local or AllWorkers job), as the seed decided.

Failure follows Kubeflow's semantics, the same as the batch runtime's: each child Job
fails on its first failed pod (backoffLimit 0) unless its restart policy is OnFailure
(the container restarts in place within the Job's backoffLimit); a failed `Never` or
`OnFailure` replica fails the JobSet at once; under `ExitCode`, a permanent exit code
(1-127, the pod failure policy's FailJob) fails it at once, and so does a pod a sidecar
failed while `mxnet` exited 0 (`_sidecar_rules`); any other failure (a signal) restarts
the whole gang, `runPolicy.backoffLimit` times at most
(`failurePolicy.maxRestarts`: the budget is the job's, not each replica's). A
disruption is not a failure (`runtime/disruption.py`): a child Job whose pod Kubernetes
took away fails on it (its pod failure policy's first rule), and the JobSet restarts the
whole gang without counting it (`RestartJobSetAndIgnoreMaxRestarts`, the first rule).

Every field JobSet's webhook or its CRD would default is written explicitly: its
controller assumes them, and a GitOps diff against the live object stays clean.

A queued job's JobSet carries `kueue.x-k8s.io/queue-name` and is created suspended;
from then on Kueue owns `spec.suspend` and what it injects into the pod templates at
admission (node selectors, tolerations): mxgitops never reads them back as edits.

A queued job whose manifest says `runPolicy.suspend: true` is created held out of the
queue as well: its JobSet names a prebuilt Workload that does not exist
(`kueue.x-k8s.io/prebuilt-workload-name`, `hold_name`). Kueue then makes no Workload
of its own for it and waits, the JobSet suspended, so no pod of it starts (Kueue
v0.17.0's jobframework: a job with that label is only ever admitted through the
Workload it names). Resuming removes the label while the JobSet is suspended, which
Kueue's webhook allows, and Kueue makes its Workload and queues it (`inplace.py`).
Without a queue-name label instead, Kueue's webhook would give the JobSet the
namespace's `default` LocalQueue, where there is one (LocalQueueDefaulting, GA), and
admit it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from mxgitops.model import CONTAINER_NAME, JobMode, MxJob, ReplicaSpec, ReplicaType, RestartPolicy
from mxgitops.model import SuccessPolicy as MxSuccessPolicy
from mxgitops.objects import KubeObject, ObjectRef
from mxgitops.runtimes.jobset.kinds import JOBSET, WORKLOAD_PRIORITY_CLASS
from mxgitops.runtimes.jobset.rules import jobset_name
from mxgitops.runtimes.shared import scheduling
from mxgitops.runtimes.shared.accelerators import apply_accelerators
from mxgitops.runtimes.shared.disruption import DISRUPTION_MESSAGE
from mxgitops.runtimes.shared.inplace import IN_PLACE_ANNOTATION
from mxgitops.runtimes.shared.labels import job_labels, kubeflow_pod_labels, replica_set_labels
from mxgitops.runtimes.shared.mxconfig import dmlc_shared, dmlc_values
from mxgitops.runtimes.shared.podtemplate import (
    RenderContext,
    copied_template,
    object_annotations,
    pod_failure_policy,
    pod_failure_rules,
)

API_VERSION = "jobset.x-k8s.io/v1alpha2"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
# A queued job created suspended names a prebuilt Workload that is never made: Kueue
# waits for it instead of queueing the job (the module docstring).
HOLD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
TASK_INDEX_ENV = "MXGITOPS_TASK_INDEX"
# The child Job's own default (batch/v1): what OnFailure restarts a container within.
DEFAULT_BACKOFF_LIMIT = 6


def render_jobset(job: MxJob, ctx: RenderContext) -> list[KubeObject]:
    """The job's one object: its JobSet."""
    name = jobset_name(job)
    labels = dict(job_labels(job, ctx.instance))
    if job.queue:
        labels[scheduling.QUEUE_LABEL] = job.queue
        if job.priority_class and job.priority_class in ctx.names.get(WORKLOAD_PRIORITY_CLASS, ()):
            labels[PRIORITY_CLASS_LABEL] = job.priority_class
        if job.run_policy.active_deadline_seconds is not None:
            labels[MAX_EXEC_TIME_LABEL] = str(job.run_policy.active_deadline_seconds)
        if job.run_policy.suspend:
            labels[HOLD_LABEL] = hold_name(name)
    annotations = object_annotations(job, ctx)
    annotations.update(in_place_annotation(job))
    env = _dmlc_env(job, name)
    spec: dict[str, Any] = {
        # Queued: created suspended, and Kueue unsuspends it when it admits it whole.
        "suspend": bool(job.queue) or job.run_policy.suspend,
        "network": {
            "enableDNSHostnames": True,
            "subdomain": name,
            "publishNotReadyAddresses": True,
        },
        "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
        "successPolicy": {"operator": "All", "targetReplicatedJobs": [_deciding_role(job)]},
        "failurePolicy": _failure_policy(job),
        "replicatedJobs": [_replicated_job(job, r, ctx, env) for r in job.replica_specs],
    }
    metadata = {"name": name, "namespace": job.namespace, "labels": labels}
    metadata["annotations"] = annotations
    return [{"apiVersion": API_VERSION, "kind": str(JOBSET), "metadata": metadata, "spec": spec}]


def hold_name(jobset: str) -> str:
    """The prebuilt Workload a held JobSet names: never made by mxgitops, and unlike the
    names Kueue generates (`jobset-{name}-{hash}`). A JobSet name leaves room for it
    (its pods' names are longer, `rules.name_problems`)."""
    return f"{jobset}-suspended"


def jobset_refs(job: MxJob) -> list[ObjectRef]:
    """The refs of `render_jobset`'s objects, without rendering them."""
    return [ObjectRef(JOBSET, job.namespace, jobset_name(job))]


def in_place_values(job: MxJob) -> dict[str, Any]:
    """What changes on a live JobSet without a restart, as its spec spells it. A queued
    job's `suspend` is Kueue's, and its deadline is the max-exec-time label, not here."""
    values: dict[str, Any] = {}
    if not job.queue:
        values["suspend"] = job.run_policy.suspend
    # Never set (the TTL is job-wide, `runpolicy.py`): unset where an earlier version set it.
    values["ttlSecondsAfterFinished"] = None
    return values


def recorded_in_place(job: MxJob) -> dict[str, Any]:
    """What the in-place annotation records: the values set (a queued job's suspend too,
    which stops it through its Kueue Workload, `inplace.py`), none of the defaults."""
    values = {k: v for k, v in in_place_values(job).items() if v not in (None, False)}
    if job.queue and job.run_policy.suspend:
        values["suspend"] = True
    return values


def in_place_annotation(job: MxJob) -> dict[str, str]:
    """The record of `in_place_values` (the batch runtime's annotation, the same format)."""
    values = recorded_in_place(job)
    if not values:
        return {}
    return {IN_PLACE_ANNOTATION: json.dumps(values, sort_keys=True, separators=(",", ":"))}


def _deciding_role(job: MxJob) -> str:
    """Whose success is the job's: the scheduler's (the seed's rule for a dist job), or
    the workers' (a local job; AllWorkers, e.g. BytePS, whose scheduler never exits)."""
    if job.mode is JobMode.DIST and job.success_policy is MxSuccessPolicy.SCHEDULER:
        return ReplicaType.SCHEDULER.role
    return ReplicaType.WORKER.role


# A child Job failed on a disruption (its pod failure policy's rule on DisruptionTarget,
# `runtime/disruption.py`) restarts the whole gang, not counted against maxRestarts
# (the job's backoffLimit): a disruption is not the job's failure.
DISRUPTION_RULE: dict[str, Any] = {
    "name": "disruption",
    "action": "RestartJobSetAndIgnoreMaxRestarts",
    "onJobFailureReasons": ["PodFailurePolicy"],
    "onJobFailureMessagePatterns": [DISRUPTION_MESSAGE],
}


def _failure_policy(job: MxJob) -> dict[str, Any]:
    """Fail at once on what is permanent; restart the gang on what is not, within the
    job's backoffLimit (`maxRestarts`). Rules are tried in order; none matched restarts."""
    by_policy: dict[RestartPolicy, list[str]] = {}
    for replica in job.replica_specs:
        by_policy.setdefault(replica.restart_policy, []).append(replica.type.role)
    rules = []
    if set(by_policy) - {RestartPolicy.ON_FAILURE}:  # child Jobs with a pod failure policy
        rules.append(DISRUPTION_RULE)
    exit_code = by_policy.get(RestartPolicy.EXIT_CODE, [])
    if exit_code:
        rules.append(
            {
                "name": "permanentExitCode",
                "action": "FailJobSet",
                "onJobFailureReasons": ["PodFailurePolicy"],
                "targetReplicatedJobs": exit_code,
            }
        )
    at_once = by_policy.get(RestartPolicy.NEVER, []) + by_policy.get(RestartPolicy.ON_FAILURE, [])
    if at_once:
        rules.append(
            {"name": "replicaFailed", "action": "FailJobSet", "targetReplicatedJobs": at_once}
        )
    if job.run_policy.active_deadline_seconds is not None and not job.queue:
        rules.append(
            {
                "name": "deadlineExceeded",
                "action": "FailJobSet",
                "onJobFailureReasons": ["DeadlineExceeded"],
            }
        )
    return {
        "maxRestarts": job.run_policy.backoff_limit or 0,
        "restartStrategy": "Recreate",
        "rules": rules,
    }


# Kubernetes' limit on a pod failure policy's rules.
MAX_POD_FAILURE_RULES = 20
NONZERO: dict[str, Any] = {"operator": "NotIn", "values": [0]}  # exit code 0 never matches


def _sidecar_rules(template: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Under `ExitCode`, a pod another container failed while `mxnet` exited 0 fails the
    job at once, as Kubeflow's operator did (it read `mxnet`'s exit code alone, and 0 is
    not retryable) and as the batch runtime does (`batch/status.py`). No rule can name
    exit code 0, and the JobSet sees only its child Job's failure: so `mxnet`'s other
    exit codes (from 128, after the permanent ones' rule) are counted, which restarts the
    gang as before; then a failure of any other container fails the child Job through
    the pod failure policy, which fails the JobSet (`permanentExitCode`). Init containers
    are not named: one that failed never let `mxnet` run, and is retried."""
    containers = (template.get("spec") or {}).get("containers") or []
    others = [str(c.get("name")) for c in containers if c.get("name") != CONTAINER_NAME]
    if not others:
        return []
    rules: list[dict[str, Any]] = [
        {"action": "Count", "onExitCodes": {"containerName": CONTAINER_NAME, **NONZERO}}
    ]
    room = MAX_POD_FAILURE_RULES - len(pod_failure_rules(RestartPolicy.EXIT_CODE, dist=True)) - 1
    if len(others) > room:  # too many to name: any container but mxnet, init ones too
        return [*rules, {"action": "FailJob", "onExitCodes": dict(NONZERO)}]
    named = [{"action": "FailJob", "onExitCodes": {"containerName": n, **NONZERO}} for n in others]
    return rules + named


def _replicated_job(
    job: MxJob, replica: ReplicaSpec, ctx: RenderContext, env: Callable[[ReplicaType], list[Any]]
) -> dict[str, Any]:
    role = replica.type.role
    restart = replica.restart_policy
    job_spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": replica.replicas,
        "parallelism": replica.replicas,
        "backoffLimit": (
            _or(job.run_policy.backoff_limit, DEFAULT_BACKOFF_LIMIT)
            if restart is RestartPolicy.ON_FAILURE
            else 0
        ),
    }
    if job.run_policy.active_deadline_seconds is not None and not job.queue:
        job_spec["activeDeadlineSeconds"] = job.run_policy.active_deadline_seconds
    extra = _sidecar_rules(replica.template) if restart is RestartPolicy.EXIT_CODE else []
    # dist: the JobSet restarts a disrupted gang
    job_spec.update(pod_failure_policy(restart, dist=True, extra=extra))
    job_spec["template"] = _pod_template(job, replica, ctx, env(replica.type))
    rjob: dict[str, Any] = {
        "name": role,
        "groupName": "default",
        "replicas": 1,
        "template": {"metadata": {}, "spec": job_spec},
    }
    if replica.type is not ReplicaType.SCHEDULER and job.replica(ReplicaType.SCHEDULER):
        rjob["dependsOn"] = [{"name": ReplicaType.SCHEDULER.role, "status": "Ready"}]
    return rjob


def _pod_template(
    job: MxJob, replica: ReplicaSpec, ctx: RenderContext, env: list[dict[str, Any]]
) -> dict[str, Any]:
    template: dict[str, Any] = copied_template(dict(replica.template))
    metadata: dict[str, Any] = template.get("metadata") or {}
    labels = replica_set_labels(job, ctx.instance, replica.type)
    kubeflow = kubeflow_pod_labels(job, replica.type, None)
    metadata["labels"] = {**(metadata.get("labels") or {}), **kubeflow, **labels}
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        **object_annotations(job, ctx),
    }
    pod_spec: dict[str, Any] = template.get("spec") or {}
    restart = replica.restart_policy
    pod_spec["restartPolicy"] = (
        RestartPolicy.NEVER.value if restart is RestartPolicy.EXIT_CODE else restart.value
    )
    for container in pod_spec.get("containers") or []:
        if container.get("name") == CONTAINER_NAME and env:
            container["env"] = [*(container.get("env") or []), *env]
    apply_accelerators(pod_spec, ctx.accelerators)
    for kind in ("initContainers", "containers"):
        for container in pod_spec.get(kind) or []:
            # What JobSet's webhook writes back (a Go struct without omitempty's effect).
            container.setdefault("resources", {})
    return {"metadata": metadata, "spec": pod_spec}


def scheduler_address(jobset: str) -> str:
    """The scheduler pod's stable DNS name, from any pod of the JobSet's namespace."""
    return pod_address(jobset, ReplicaType.SCHEDULER, 0)


def pod_address(jobset: str, replica_type: ReplicaType, index: int) -> str:
    """One replica's pod's stable DNS name (its role's one child Job, pod `index`)."""
    return f"{jobset}-{replica_type.role}-0-{index}.{jobset}"


def _dmlc_env(job: MxJob, jobset: str) -> Callable[[ReplicaType], list[dict[str, Any]]]:
    """Each role's DMLC environment (one pod template per role): the task index comes from
    the pod's completion index, through an env var MX_CONFIG refers to, `$(...)`."""
    if job.mode is JobMode.LOCAL:
        return lambda replica_type: []
    shared, head = dmlc_shared(
        job,
        lambda replica_type, i: pod_address(jobset, replica_type, i),
        tuner_labels=False,
    )
    index = {
        "name": TASK_INDEX_ENV,
        "valueFrom": {
            "fieldRef": {
                "apiVersion": "v1",
                "fieldPath": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']",
            }
        },
    }

    def env(replica_type: ReplicaType) -> list[dict[str, Any]]:
        values = dmlc_values(shared, head, replica_type, f"$({TASK_INDEX_ENV})")
        return [index, *({"name": k, "value": v} for k, v in values.items())]

    return env


def _or(value: int | None, default: int) -> int:
    return default if value is None else value
