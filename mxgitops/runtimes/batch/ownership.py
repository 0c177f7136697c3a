"""Which job a batch Job or Service belongs to, and whether its parts add up.

Its name, which nobody can edit (`{job}-{type}-{runtimeId}-{index}`), says the job;
everything a hand can edit is checked against it: the `mxgitops.io/job`, `job_type`,
`runtime_id` and `task_index` labels, and the spec-hash annotation, from which the
runtime id derives. Pure; `live.py` groups by it.
"""

from __future__ import annotations

import functools
import re

from mxgitops import objects
from mxgitops.model import RUNTIME_ID_LENGTH, ReplicaType, runtime_id_of
from mxgitops.objects import KubeObject
from mxgitops.runtimes.shared.labels import JOB_TYPE_LABEL, RUNTIME_ID_LABEL, TASK_INDEX_LABEL

JOB_TYPES = {t.role: t.value for t in ReplicaType}  # the job_type label of each role
OBJECT_NAME = re.compile(
    rf"(?P<job>.+)-(?P<role>{'|'.join(JOB_TYPES)})-(?P<rid>[0-9a-z]{{{RUNTIME_ID_LENGTH}}})"
    r"-(?P<index>0|[1-9][0-9]*)"
)
_SPEC_HASH = re.compile(r"[0-9a-f]{64}")


def identity(obj: KubeObject) -> tuple[str | None, str | None]:
    """The job an object's name says it belongs to, and why its labels or spec hash
    disagree (None when everything adds up). An object whose name is none of ours
    belongs to the job its label names, as a stray; without that label, to none."""
    metadata = obj.get("metadata") or {}
    labels = metadata.get("labels") or {}
    match = OBJECT_NAME.fullmatch(str(metadata.get("name") or ""))
    if match is None:
        return labels.get(objects.JOB_NAME_LABEL), "its name is not one mxgitops gives"
    job, role, runtime_id, index = match.group("job", "role", "rid", "index")
    expected = (
        (objects.JOB_NAME_LABEL, job),
        (JOB_TYPE_LABEL, JOB_TYPES[role]),
        (RUNTIME_ID_LABEL, runtime_id),
        (TASK_INDEX_LABEL, index),
    )
    wrong = [
        f"label {key} is {_shown(labels.get(key))}, its name says {value}"
        for key, value in expected
        if labels.get(key) != value
    ]
    spec_hash = (metadata.get("annotations") or {}).get(objects.SPEC_HASH_ANNOTATION, "")
    if _runtime_of(spec_hash) != runtime_id:
        wrong.append(f"annotation {objects.SPEC_HASH_ANNOTATION} is not of runtime {runtime_id}")
    return job, "; ".join(wrong) or None


@functools.lru_cache(maxsize=4096)
def _runtime_of(spec_hash: str) -> str | None:
    """The runtime a spec-hash annotation names; None if it is no spec hash. All objects
    of a job carry the same hash, and deriving its runtime was most of checking one."""
    return runtime_id_of(spec_hash) if _SPEC_HASH.fullmatch(spec_hash) else None


def _shown(value: str | None) -> str:
    return "missing" if value is None else repr(value)
