"""The fields of a live object's status that mxgitops reads, checked as the LIST brings
them: an answer is untrusted input, like any.

kube-apiserver stores a Job's `succeeded` as an integer and a pod's conditions as a
list of objects; an API server gone wrong, or a proxy, may say `succeeded: "x"` or
`conditions: 5`. Reading the state from such an item failed deep in planning (exit 70,
on every sync); here it is refused as the LIST's own error, naming the field, as an
item whose status is no object is (`listing.py`). Only the fields the readers use
(`trainer/status.py`, `trainer/failure.py`, `jobset/live.py`) are checked, each
where it is present: a null is an absent field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxgitops.objects import Kind

# A schema: a type (int is never a bool), a mapping of field -> schema (an object,
# other fields unchecked), or a one-element list (a list of that schema).
Schema = type | Mapping[str, Any] | list[Any]

_CONDITIONS = [{"type": str, "status": str, "reason": str, "message": str}]
_STATE = {
    "terminated": {
        "exitCode": int,
        "signal": int,
        "reason": str,
        "message": str,
        "startedAt": str,
        "finishedAt": str,
    },
    "waiting": {"reason": str, "message": str},
    "running": {"startedAt": str},
}
_CONTAINERS = [{"name": str, "restartCount": int, "state": _STATE, "lastState": _STATE}]
_COUNTS = ("active", "succeeded", "failed", "ready", "terminating", "suspended")
STATUS: Mapping[Kind, Mapping[str, Schema]] = {
    Kind.JOB: {
        **dict.fromkeys(_COUNTS, int),
        "startTime": str,
        "completionTime": str,
        "conditions": _CONDITIONS,
    },
    Kind.POD: {
        "phase": str,
        "reason": str,
        "message": str,
        "startTime": str,
        "conditions": _CONDITIONS,
        "containerStatuses": _CONTAINERS,
        "initContainerStatuses": _CONTAINERS,
    },
    Kind.JOBSET: {
        "conditions": _CONDITIONS,
        "replicatedJobsStatus": [{"name": str, **dict.fromkeys(_COUNTS, int)}],
    },
    Kind.WORKLOAD: {"conditions": _CONDITIONS, "clusterName": str},
    Kind.MULTIKUEUE_CLUSTER: {"conditions": [{**_CONDITIONS[0], "lastTransitionTime": str}]},
}


def status_problem(kind: Kind, status: Mapping[str, Any]) -> str:
    """What is ill-typed in `status` of an object of `kind` ("" if nothing)."""
    schema = STATUS.get(kind)
    return _problem(status, schema, "status") if schema else ""


def _problem(value: Any, schema: Schema, path: str) -> str:
    if value is None:
        return ""
    if isinstance(schema, list):
        if not isinstance(value, list):
            return f"{path} is {_what(value)}, not a list"
        for index, item in enumerate(value):
            found = _problem(item, schema[0], f"{path}[{index}]")
            if found:
                return found
        return ""
    if isinstance(schema, Mapping):
        if not isinstance(value, dict):
            return f"{path} is {_what(value)}, not an object"
        for key, inner in schema.items():
            found = _problem(value.get(key), inner, f"{path}.{key}")
            if found:
                return found
        return ""
    if isinstance(value, bool) is (schema is bool) and isinstance(value, schema):
        return ""
    return f"{path} is {_what(value)}, not {'an integer' if schema is int else 'a string'}"


def _what(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    return names.get(type(value), "a number")
