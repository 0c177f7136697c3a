"""What a job must meet to run on JobSet, what JobSet cannot honour of it, and what its
spec hash adds for it: the JobSet runtime's part of reading a manifest (`spec.py` asks
it through the registry) and of the model's spec hash.

JobSet names each pod `{jobset}-{replicatedJob}-{jobIndex}-{podIndex}-{5 random}`, a
DNS-1035 label of at most 63 characters, so a job's name is checked against that, not
against the batch runtime's limits. Kueue admits a JobSet whole, by what its pods request:
a `minAvailable` below the job's pods, `minResources` and a per-job
`scheduleTimeoutSeconds` are warnings that say what happens instead. A JobSet's
replicatedJobs and failure policy are immutable, so the deadline and backoff limit
that land there are part of its spec hash (a change replaces), as are its queue and
priority class. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mxgitops.model import MAX_NAME_LENGTH, RUNTIME_ID_LENGTH, FieldProblem, MxJob, Path

# The JobSet controller's random suffix of a pod name ("-abcde"), which its webhook counts.
POD_SUFFIX_LENGTH = 6
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def jobset_name(job: MxJob) -> str:
    """The JobSet of a job's runtime: `{job}-{runtimeId}` (a changed spec, a new name)."""
    return f"{job.name}-{job.runtime_id}"


def longest_pod_name(job: MxJob) -> str:
    """The longest pod name the JobSet controller generates for the job (random part as
    `abcde`), as its webhook computes it: every role is one replicated Job of one Job."""
    widest = max(job.replica_specs, key=lambda r: len(r.type.role) + len(str(r.replicas - 1)))
    return f"{jobset_name(job)}-{widest.type.role}-0-{widest.replicas - 1}-abcde"


def name_problems(job: MxJob) -> list[FieldProblem]:
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
    if not job.replica_specs:
        return []  # no pod to name (the job's mode says what is missing)
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
    """What Kueue does not honour of the job's schedulingPolicy, said as what happens."""
    found: list[FieldProblem] = []
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


def hash_shape(job: MxJob) -> Mapping[str, Any]:
    """What a job on JobSet adds to its spec hash (the model's `runtime` block)."""
    policy = job.run_policy
    return {
        "name": job.runtime,
        "queue": job.queue,
        "priorityClass": job.priority_class,
        # A JobSet's replicatedJobs and failure policy are immutable: where these
        # land there (the child Jobs' deadline, maxRestarts), a change replaces.
        "activeDeadlineSeconds": policy.active_deadline_seconds,
        "backoffLimit": policy.backoff_limit,
    }
