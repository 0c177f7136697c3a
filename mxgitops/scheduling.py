"""What a manifest asks of a batch scheduler, and which runtime that makes it run on.

A job that names a Kueue queue (`schedulingPolicy.queue`, or the
`kueue.x-k8s.io/queue-name` label Kueue itself reads) runs as one JobSet that Kueue
admits whole or not at all; so does every dist job when the operator's default runtime
is `jobset`. A local job needs no JobSet unless it is queued. Everything else runs as
the seed's batch Jobs.

The runtime is part of the model (and of the spec hash, for JobSet only: a batch job
hashes as it always did), so moving a job between runtimes is a replace, and its names
are checked against the limits of the runtime it runs on: JobSet names each pod
`{jobset}-{replicatedJob}-{jobIndex}-{podIndex}-{5 random}`, a DNS-1035 label of at most
63 characters. What neither runtime can honour (a `minAvailable` below the job's pods,
`minResources`, a per-job `scheduleTimeoutSeconds`) is a warning that says what happens
instead. Pure: used by `spec.py` while a manifest is read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mxgitops.model import (
    MAX_NAME_LENGTH,
    RUNTIME_ID_LENGTH,
    FieldProblem,
    JobMode,
    MxJob,
    Path,
    Runtime,
)

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# The JobSet controller's random suffix of a pod name ("-abcde"), which its webhook counts.
POD_SUFFIX_LENGTH = 6
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_QUEUE_NAME = 63  # it is a label's value (Kueue's queue-name)

_BATCH_GANG_FIELDS = {
    "minAvailable": "minAvailable {value} is not enforced, pods start one by one",
    "minResources": "minResources are not reserved before the pods start",
    "scheduleTimeoutSeconds": "scheduleTimeoutSeconds {value} is not enforced",
}
_BATCH_WHY = (
    ": mxgitops runs each replica as a batch Job, without a gang scheduler "
    "(no Volcano or scheduler-plugins PodGroup); name a queue to run it on JobSet under Kueue"
)


def queue_of(
    labels: Mapping[str, Any], scheduling: Mapping[str, Any], where: Path
) -> tuple[str, list[FieldProblem], list[FieldProblem]]:
    """The job's queue, problems and warnings: Kueue's label, else schedulingPolicy.queue.

    Where both name a queue and differ, the label wins (it is Kueue's own; Kubeflow's
    `queue` often named a Volcano queue), and the other is said to be unused."""
    from_policy = str(scheduling.get("queue") or "")
    from_label = str(labels.get(QUEUE_LABEL) or "")
    warnings = []
    if from_policy and from_label and from_policy != from_label:
        warnings.append(
            FieldProblem(
                (*where, "queue"),
                f"queue {from_policy!r} is not used: the label {QUEUE_LABEL} names the "
                f"job's Kueue queue, {from_label!r}",
            )
        )
    queue = from_label or from_policy
    problems = []
    if queue and not (len(queue) <= MAX_QUEUE_NAME and _DNS1123_LABEL.match(queue)):
        problems.append(
            FieldProblem(
                ("metadata", "labels", QUEUE_LABEL) if from_label else (*where, "queue"),
                f"{queue!r} is not a LocalQueue name (a DNS-1123 label: lower-case letters, "
                f"digits and '-', at most {MAX_QUEUE_NAME} characters)",
            )
        )
    return queue, problems, warnings


def runtime_for(mode: JobMode, queue: str, default: Runtime) -> Runtime:
    """JobSet for a queued job, and for a dist job when that is the operator's default."""
    if queue:
        return Runtime.JOBSET
    return default if mode is JobMode.DIST else Runtime.BATCH


def jobset_name(job: MxJob) -> str:
    """The JobSet of a job's runtime: `{job}-{runtimeId}` (a changed spec, a new name)."""
    return f"{job.name}-{job.runtime_id}"


def longest_pod_name(job: MxJob) -> str:
    """The longest pod name the JobSet controller generates for the job (random part as
    `abcde`), as its webhook computes it: every role is one replicated Job of one Job."""
    widest = max(job.replica_specs, key=lambda r: len(r.type.role) + len(str(r.replicas - 1)))
    return f"{jobset_name(job)}-{widest.type.role}-0-{widest.replicas - 1}-abcde"


def jobset_name_problems(job: MxJob) -> list[FieldProblem]:
    """The job's name within JobSet's limits (checked only for jobs that run on it)."""
    where: Path = ("metadata", "name")
    if not _DNS1035_LABEL.match(job.name):
        return [
            FieldProblem(
                where,
                f"{job.name!r} must start with a letter: it runs on JobSet, whose Job and pod "
                "names are DNS-1035 labels",
            )
        ]
    longest = longest_pod_name(job)
    if len(longest) <= MAX_NAME_LENGTH:
        return []
    allowed = MAX_NAME_LENGTH - (len(longest) - len(job.name))
    return [
        FieldProblem(
            where,
            f"{job.name!r} is too long for JobSet: its pods are named like {longest!r} "
            f"({len(longest)} characters, the maximum is {MAX_NAME_LENGTH}; the JobSet adds "
            f"'-' and a {RUNTIME_ID_LENGTH}-character runtime id, the role, the indexes and a "
            f"{POD_SUFFIX_LENGTH - 1}-character random suffix); use at most {allowed} "
            "characters for this job's name",
        )
    ]


def scheduling_warnings(
    job: MxJob, scheduling: Mapping[str, Any], where: Path
) -> list[FieldProblem]:
    """What the job's runtime cannot honour of its schedulingPolicy, said as what happens."""
    found: list[FieldProblem] = []
    if job.runtime is Runtime.BATCH:
        for name, message in _BATCH_GANG_FIELDS.items():
            if scheduling.get(name) is not None:
                text = message.format(value=scheduling[name]) + _BATCH_WHY
                found.append(FieldProblem((*where, name), text))
        return found
    pods = sum(r.replicas for r in job.replica_specs)
    minimum = scheduling.get("minAvailable")
    if isinstance(minimum, int) and minimum < pods:
        found.append(
            FieldProblem(
                (*where, "minAvailable"),
                f"minAvailable {minimum} is below the job's {pods} pods: Kueue admits the "
                f"JobSet whole, all {pods} pods or none",
            )
        )
    if scheduling.get("minResources") is not None:
        found.append(
            FieldProblem(
                (*where, "minResources"),
                "minResources are not used: Kueue admits the job by the resources its pods request",
            )
        )
    if scheduling.get("scheduleTimeoutSeconds") is not None:
        found.append(
            FieldProblem(
                (*where, "scheduleTimeoutSeconds"),
                f"scheduleTimeoutSeconds {scheduling['scheduleTimeoutSeconds']} is not per "
                "job under Kueue: the job waits in its queue until admitted (the cluster's "
                "waitForPodsReady settings bound how long an admitted job may take to start)",
            )
        )
    return found
