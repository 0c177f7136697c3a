"""The opt-in progress line: what a custom training loop prints so mxgitops can follow it.

    MXGITOPS_PROGRESS {"epoch": 3, "epochs": 20, "step": 120, "steps": 500,
                       "metrics": {"validation-accuracy": 0.912}}

on one line (the manual: docs/guides/training-record.md). `epoch` (required) counts
from 1 and is the epoch the line is about; `epochs` the total; `step` the steps done
in this epoch and `steps` the steps in each; `metrics` numbers by name;
`samples_per_sec` and `epoch_seconds` (how long the epoch took) are optional too. A
line without `step`, or with `step` equal to `steps`, reports a finished epoch.
Anything may stand before the prefix (a logging prefix); other keys are ignored, so a
later version may add some. A line whose known fields have the wrong type is ignored
whole: half a statement would mislead more than none.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

PREFIX = "MXGITOPS_PROGRESS "
MAX_JSON_CHARS = 4096
MAX_EPOCHS = 1_000_000
MAX_STEPS = 10**12


@dataclass(frozen=True)
class ProgressSaid:
    epoch: int
    epochs: int | None = None
    step: int | None = None
    steps: int | None = None
    samples_per_sec: float | None = None
    epoch_seconds: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)


def progress_line(
    epoch: int,
    *,
    epochs: int | None = None,
    step: int | None = None,
    steps: int | None = None,
    metrics: dict[str, float] | None = None,
) -> str:
    """The line a loop prints (what the manual shows, and what the tests print)."""
    said: dict[str, Any] = {"epoch": epoch}
    optional = {"epochs": epochs, "step": step, "steps": steps, "metrics": metrics}
    said.update({key: value for key, value in optional.items() if value is not None})
    return PREFIX + json.dumps(said, separators=(",", ":"))


def read_progress_json(text: str) -> ProgressSaid | None:
    """The fields of the JSON after the prefix, or None when it is not one we read."""
    if len(text) > MAX_JSON_CHARS:
        return None
    try:
        data = json.loads(text, parse_constant=_not_a_number)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    try:
        epoch = _count(data.get("epoch"), 1, MAX_EPOCHS)
        if epoch is None:
            return None
        metrics = data.get("metrics", {})
        if not isinstance(metrics, dict):
            return None
        return ProgressSaid(
            epoch=epoch,
            epochs=_count(data.get("epochs"), 1, MAX_EPOCHS),
            step=_count(data.get("step"), 0, MAX_STEPS),
            steps=_count(data.get("steps"), 1, MAX_STEPS),
            samples_per_sec=_not_negative(_number(data.get("samples_per_sec"))),
            epoch_seconds=_not_negative(_number(data.get("epoch_seconds"))),
            metrics={
                str(name): number
                for name, given in metrics.items()
                if (number := _number(given, strict=False)) is not None
            },
        )
    except _WrongType:
        return None


class _WrongType(Exception):
    pass


def _not_a_number(constant: str) -> None:
    """`NaN`, `Infinity`: read as no value."""
    return None


def _count(value: object, least: int, most: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise _WrongType
    return value


def _not_negative(number: float | None) -> float | None:
    return number if number is not None and number >= 0 else None


def _number(value: object, *, strict: bool = True) -> float | None:
    """A finite number; None for none (or, in `metrics`, for anything else)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if strict:
            raise _WrongType
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None
