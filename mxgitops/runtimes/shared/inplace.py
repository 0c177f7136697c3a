"""What changes on a live object without a restart, on any runtime: the values shared.

Kubernetes lets a few fields of a running job's objects change (each runtime says which:
`batch/inplace.py`, `jobset/inplace.py`). Replacing the job for those would restart
training from scratch, so the spec hash that names a runtime leaves them out
(`model.IN_PLACE_RUN_POLICY`) and each runtime compares them instead, for the planner:
pure, no I/O. Every object records the values mxgitops last set in the annotation
`mxgitops.io/in-place` (absent while none is set). A value the manifest changed since is
an update; a value the manifest did not change but the object no longer has was edited by
hand (drift), and is set back. Either way the change (`InPlace`) names each field it
moves (`Move`), and the object is patched (a JSON merge patch), never replaced.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from mxgitops.objects import KubeObject, ObjectRef

IN_PLACE_ANNOTATION = "mxgitops.io/in-place"


@dataclass(frozen=True)
class Move:
    """One field of a live object, from what it is to what the manifest wants."""

    field: str  # `spec.<name>` of a batch Job, or the on-change annotation's key
    before: Any  # None: unset
    after: Any
    set_back: bool = False  # the manifest did not change it: a hand did

    def __str__(self) -> str:
        shown = _shown if self.field.startswith("spec.") else str
        moved = f"{self.field} {shown(self.before)} -> {shown(self.after)}"
        return moved + (" (set back)" if self.set_back else "")


@dataclass(frozen=True)
class InPlace:
    """One object's patch, and what it changes (`drift`: set back after a hand edit)."""

    ref: ObjectRef
    patch: KubeObject
    moves: tuple[Move, ...]
    drift: bool

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(str(m) for m in self.moves) or ("its record of in-place values",)

    def describe(self) -> str:
        return f"{self.ref.kind.lower()}/{self.ref.name}: {', '.join(self.fields)}"


def encode(values: Mapping[str, Any]) -> str:
    """The in-place annotation's text for `values` (both runtimes write it so)."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def decode(text: str, fields: Collection[str] | None) -> dict[str, Any]:
    """The values of an in-place annotation, those of `fields` only (None: all); {} for
    text that is not a JSON object (a hand edit: the live fields then read as drift)."""
    try:
        values = json.loads(text) if text else {}
    except ValueError:
        return {}
    if not isinstance(values, dict):
        return {}
    return {k: v for k, v in values.items() if fields is None or k in fields}


def _shown(value: Any) -> str:
    return "unset" if value is None else json.dumps(value)
