"""A status note's machine-readable block, checked field by field before it is read.

Notes live on `refs/notes/*`, which anyone who can push to the jobs repository can
write: a value of the wrong type there must not reach the code that renders or
compares summaries (it ended syncs and `status` in exit 70). `fields` refuses the
first field of the wrong type, naming it, and leaves out the fields it does not know:
a note written by a newer mxgitops is still read for what this one knows of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class NoteError(ValueError):
    """A note whose machine-readable block is not a summary: which field, and why."""


STRINGS = "strings"
SUMMARY: dict[str, Any] = {
    "commit": str, "instance": str, "jobs": list, "problems": STRINGS,
    "prune_refused": (str, type(None)), "dry_run": bool, "warnings": STRINGS,
    "synced_at": str, "version": (str, int),
}  # fmt: skip
JOB: dict[str, Any] = {
    "namespace": str, "name": str, "action": str, "reason": str, "state": str,
    "spec_hash": str, "source": str, "replicas": list, "objects": STRINGS,
    "errors": STRINGS, "runtime_id": str, "state_reason": str,
    "failure": (dict, type(None)), "warnings": STRINGS, "commit": str, "author": str,
    "placement": str, "queue": str, "moved_from": str, "unreachable": str,
    "record": (dict, type(None)),
}  # fmt: skip
REPLICA: dict[str, Any] = {"type": str, "state": str, "replicas": int, "states": dict}
FAILURE: dict[str, Any] = {
    "replica": str, "exit_code": (int, type(None)), "reason": str, "message": str,
    "pod": str, "container": str, "log": str,
}  # fmt: skip


def fields(data: Any, where: str, types: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of `data` that `types` knows, each checked to be of its type."""
    if not isinstance(data, dict):
        raise NoteError(f"{where}: not an object")
    known = {key: value for key, value in data.items() if key in types}
    for key, value in known.items():
        kind = types[key]
        strings = kind == STRINGS
        ok = (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
            if strings
            else isinstance(value, kind) and not (isinstance(value, bool) and kind is int)
        )
        if not ok:
            expected = "a list of strings" if strings else _name(kind)
            raise NoteError(f"{where}.{key}: expected {expected}, got {type(value).__name__}")
    return known


def _name(kind: Any) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {str: "a string", int: "a whole number", bool: "true or false", list: "a list"}
    names.update({dict: "an object", type(None): "null"})
    return " or ".join(names[k] for k in kinds)
