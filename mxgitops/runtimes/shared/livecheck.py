"""The fields of a live object's status that mxgitops reads, checked as the LIST brings
them: an answer is untrusted input, like any.

kube-apiserver stores a Job's `succeeded` as an integer and a pod's conditions as a
list of objects; an API server gone wrong, or a proxy, may say `succeeded: "x"` or
`conditions: 5`. Reading the state from such an item failed deep in planning (exit 70,
on every sync); here it is refused as the LIST's own error, naming the field, as an
item whose status is no object is (`listing.py`). Only the fields the readers use
(`batch/status.py`, `batch/failure.py`, a runtime's own readers) are checked, each
where it is present: a null is an absent field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxgitops.objects import Kind

# A schema: a type (int is never a bool), a mapping of field -> schema (an object,
# other fields unchecked), or a one-element list (a list of that schema).
Schema = type | Mapping[str, Any] | list[Any]

CONDITIONS = [{"type": str, "status": str, "reason": str, "message": str}]
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
COUNTS = ("active", "succeeded", "failed", "ready", "terminating", "suspended")
STATUS: Mapping[Kind, Mapping[str, Schema]] = {
    Kind.JOB: {
        **dict.fromkeys(COUNTS, int),
        "startTime": str,
        "completionTime": str,
        "conditions": CONDITIONS,
    },
    Kind.POD: {
        "phase": str,
        "reason": str,
        "message": str,
        "startTime": str,
        "conditions": CONDITIONS,
        "containerStatuses": _CONTAINERS,
        "initContainerStatuses": _CONTAINERS,
    },
}


# What the receiver reads of a Job's metadata (`manualjob.controlled_by`, `finished`).
METADATA: Mapping[str, Schema] = {
    "name": str,
    "namespace": str,
    "deletionTimestamp": str,
    "ownerReferences": [{"kind": str, "name": str, "controller": bool}],
}


def object_problem(kind: Kind, obj: Any) -> str:
    """What is ill-typed in a whole object of `kind` as a watch brings it ("" if
    nothing): an object, with metadata and a name (`METADATA`), and its status."""
    if not isinstance(obj, dict):
        return f"object is {_what(obj)}, not an object"
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        return "metadata.name is missing"
    status = obj.get("status")
    if status is not None and not isinstance(status, dict):
        return f"status is {_what(status)}, not an object"
    return _problem(metadata, METADATA, "metadata") or status_problem(kind, status or {})


def name_of(obj: Any) -> str:
    """The object's name if it has one, to say which was refused ("" if none)."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) else ""


def status_problem(kind: Kind, status: Mapping[str, Any]) -> str:
    """What is ill-typed in `status` of an object of `kind` ("" if nothing): the core
    kinds' schemas are here, a runtime's own kinds' are theirs (`Kind.status`)."""
    schema = STATUS.get(kind) or kind.status
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
    wanted = {int: "an integer", bool: "a boolean"}.get(schema, "a string")
    return f"{path} is {_what(value)}, not {wanted}"


def _what(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    return names.get(type(value), "a number")
