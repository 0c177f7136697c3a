"""What changed in a job's manifest between two runs, in a few short lines.

`history` shows, beside each run, how its manifest differs from the previous run's:
`args: --lr 0.1 → 0.05`. Pure: two parsed manifests in, lines out. A field is named by
its own key (`args`, `replicas`, `image`), with its replica type in front when the change
is not the same in every replica type that has it; a list of words (`args`, `command`)
shows only the words that changed, after the flag that names them. Values are cut to a
few dozen characters and the lines to `MAX_LINES`: a manifest is anyone's to write.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import pairwise
from typing import Any

MAX_LINES = 8
MAX_VALUE = 60
ARROW = "→"
_LIST_KEYS = ("name", "mxReplicaType", "replicaType")  # what names an item of a list
_REPLICA_MAPS = ("mxReplicaSpecs", "replicaSpecs")
_IGNORED = (("metadata", "name"), ("metadata", "namespace"), ("status",))

Leaf = tuple[tuple[str, ...], Any]


def spec_change(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> tuple[str, ...]:
    """The lines saying how `after` differs from `before` (None: the job is new)."""
    return spec_changes([after] if before is None else [before, after])[-1]


def spec_changes(documents: Sequence[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    """The change of each of `documents` from the one before it (the first is a new
    job), each document flattened once."""
    flat = [dict(_leaves(document)) for document in documents]
    if not flat:
        return []
    return [("new job",), *(_changes(old, new) for old, new in pairwise(flat))]


def _changes(old: dict[tuple[str, ...], Any], new: dict[tuple[str, ...], Any]) -> tuple[str, ...]:
    changes: list[tuple[str, str, str]] = []  # (replica type, field, "old → new")
    for path in sorted(old.keys() | new.keys()):
        if old.get(path, _ABSENT) == new.get(path, _ABSENT):
            continue
        replica, field = _named(path)
        changes.append((replica, field, _shown(old.get(path, _ABSENT), new.get(path, _ABSENT))))
    if not changes:
        return ("no change to the spec",)
    replica_types = {_named(path)[0] for path in new} - {""}
    shared: dict[tuple[str, str], int] = {}
    for _, field, shown in changes:
        shared[(field, shown)] = shared.get((field, shown), 0) + 1
    lines: list[str] = []
    for replica, field, shown in changes:
        alone = len(replica_types) > 1 and shared[(field, shown)] == 1
        line = f"{replica + ' ' if alone else ''}{field}: {shown}"
        if line not in lines:
            lines.append(line)
    if len(lines) > MAX_LINES:
        lines = [*lines[: MAX_LINES - 1], f"and {len(lines) - MAX_LINES + 1} more changes"]
    return tuple(lines)


class _Absent:
    def __repr__(self) -> str:
        return "(none)"


_ABSENT: Any = _Absent()


def _leaves(value: Any, path: tuple[str, ...] = ()) -> Iterator[Leaf]:
    """(path, value) of every scalar, and of every list of scalars taken whole."""
    if any(path[: len(ignored)] == ignored for ignored in _IGNORED):
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(item, (*path, str(key)))
    elif isinstance(value, list) and all(isinstance(item, Mapping) for item in value) and value:
        for index, item in enumerate(value):
            names = [str(item[key]) for key in _LIST_KEYS if isinstance(item.get(key), str)]
            yield from _leaves(item, (*path, names[0] if names else str(index)))
    elif isinstance(value, list):
        yield path, tuple(_scalar(item) for item in value)
    else:
        yield path, _scalar(value)


def _scalar(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)


def _named(path: tuple[str, ...]) -> tuple[str, str]:
    """(replica type, field name) of a leaf's path."""
    replica = ""
    for index, key in enumerate(path[:-1]):
        if key in _REPLICA_MAPS and index + 1 < len(path) - 1:
            replica = path[index + 1]
    return replica, path[-1] if path else "spec"


def _shown(old: Any, new: Any) -> str:
    if isinstance(old, tuple) and isinstance(new, tuple):
        return _words(old, new)
    return f"{_value(old)} {ARROW} {_value(new)}"


def _words(old: Sequence[Any], new: Sequence[Any]) -> str:
    """Two lists of words by what changed: the common start and end left out, but the
    flag before the change kept (`--lr 0.1 → 0.05`)."""
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    flag = ""
    if start and str(old[start - 1]).startswith("-"):
        flag = _value(old[start - 1]) + " "
    before = " ".join(_value(word) for word in old[start : len(old) - end]) or "(none)"
    after = " ".join(_value(word) for word in new[start : len(new) - end]) or "(none)"
    return _cut(f"{flag}{before} {ARROW} {after}", 2 * MAX_VALUE)


def _value(value: Any) -> str:
    if value is _ABSENT:
        return "(none)"
    if isinstance(value, tuple):
        return _cut(" ".join(_value(item) for item in value) or "[]", MAX_VALUE)
    if isinstance(value, bool):
        return "true" if value else "false"
    return _cut("null" if value is None else str(value), MAX_VALUE)


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"
