"""What a job must meet to run on the batch runtime, and what it cannot honour of it: the
batch runtime's part of reading a manifest (`spec.py` asks it through the registry).

Its objects are named `{job}-{type}-{runtimeId}-{index}` (`model.job_object_name`), each
a DNS-1123 label of at most 63 characters, and a dist job's scheduler Service is named
as the scheduler's Job, a DNS-1035 label. Each replica runs as its own batch Job,
without a gang scheduler, so a schedulingPolicy's gang fields are warnings that say
what happens instead. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mxgitops.model import (
    MAX_NAME_LENGTH,
    RUNTIME_ID_LENGTH,
    FieldProblem,
    MxJob,
    Path,
    ReplicaType,
    job_object_name,
    object_name,
)

_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_GANG_FIELDS = {
    "minAvailable": "minAvailable {value} is not enforced, pods start one by one",
    "minResources": "minResources are not reserved before the pods start",
    "scheduleTimeoutSeconds": "scheduleTimeoutSeconds {value} is not enforced",
}
_WHY = (
    ": mxgitops runs each replica as a batch Job, without a gang scheduler "
    "(no Volcano or scheduler-plugins PodGroup); name a queue to run it on JobSet under Kueue"
)


def name_problems(job: MxJob) -> list[FieldProblem]:
    """The job's name within the limits of the names derived from it."""
    name_path: Path = ("metadata", "name")
    problems: list[FieldProblem] = []
    if job.replica(ReplicaType.SCHEDULER) is not None and not _DNS1035_LABEL.match(job.name):
        problems.append(
            FieldProblem(
                name_path,
                f"{job.name!r} must start with a letter: the scheduler Service is named after "
                "the job, and Service names are DNS-1035 labels",
            )
        )
    # The first index with the most digits of each type: no loop over every index. Only
    # lengths are compared (a runtime id always has RUNTIME_ID_LENGTH characters), so the
    # spec is hashed here only to name an object that is too long.
    widest = max(
        (
            (r.type, 10 ** (len(str(r.replicas - 1)) - 1) if r.replicas > 10 else 0)
            for r in job.replica_specs
            if r.replicas
        ),
        key=lambda derived: _object_name_length(job, *derived),
        default=None,
    )
    if widest is not None and _object_name_length(job, *widest) > MAX_NAME_LENGTH:
        longest = job_object_name(job, *widest)
        allowed = MAX_NAME_LENGTH - (len(longest) - len(job.name))
        problems.append(
            FieldProblem(
                name_path,
                f"{job.name!r} is too long: the derived object name {longest!r} has "
                f"{len(longest)} characters, the maximum is {MAX_NAME_LENGTH}; "
                f"use at most {allowed} characters for this job's name",
            )
        )
    return problems


def _object_name_length(job: MxJob, replica_type: ReplicaType, index: int) -> int:
    """len(job_object_name(...)), without the spec hash the runtime id is derived from."""
    return len(object_name(job.name, replica_type, "", index)) + RUNTIME_ID_LENGTH


def scheduling_warnings(
    job: MxJob, scheduling: Mapping[str, Any], where: Path
) -> list[FieldProblem]:
    """The gang fields of the job's schedulingPolicy, none of which a batch Job honours."""
    return [
        FieldProblem((*where, name), message.format(value=scheduling[name]) + _WHY)
        for name, message in _GANG_FIELDS.items()
        if scheduling.get(name) is not None
    ]
