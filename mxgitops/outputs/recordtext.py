"""A run's training record in words and numbers, as every output shows it: pure.

The note's text, the commit status, the Events and the metrics all say the same few
things of a `TrainingRecord` (`mxgitops/record/`): how far the run is, a few of its
metrics, and what it used. They are said here once, bounded: at most
`MAX_SHOWN_METRICS` metrics (validation ones first), each name cut to
`MAX_SHOWN_NAME` characters and written with its control characters as escapes
(`markdown.visible`), values that are not finite left out. A record read from a note
has plain names and finite values already (`record/stored.py`); these bounds hold
for any record a caller builds. Where the words go decides how they are escaped
further (a code span in markdown); a metric's name is never part of a metric's name
in Prometheus, only of a label value (`label_value`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from mxgitops.outputs.markdown import visible
from mxgitops.record.runrecord import TrainingRecord

MAX_SHOWN_METRICS = 3
MAX_SHOWN_NAME = 40
MAX_LINE = 300  # characters of one line about a record
STATUS_STEP = 5  # percent: a commit status says progress in these steps
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-/@]")
FINISHED_STATES = frozenset({"Succeeded", "Failed"})


def shown_name(name: str) -> str:
    """`name` on one line, at most `MAX_SHOWN_NAME` characters."""
    shown = visible(name)
    return shown if len(shown) <= MAX_SHOWN_NAME else shown[: MAX_SHOWN_NAME - 1] + "…"


def label_value(name: str) -> str:
    """`name` as a Prometheus label value: plain characters only (others become `_`),
    at most `MAX_SHOWN_NAME` of them."""
    return _LABEL_UNSAFE.sub("_", name[:MAX_SHOWN_NAME])


def number(value: float) -> str:
    """A metric's value as the log printed it (its shortest form), else to 6 digits."""
    exact = repr(float(value))
    return exact if len(exact) <= 12 else f"{value:.6g}"


def chosen_metrics(record: TrainingRecord, most: int = MAX_SHOWN_METRICS) -> list[str]:
    """The names of the metrics shown: validation ones first, then by name; only those
    with a finite latest value."""
    latest = record.log.latest
    names = [name for name, value in latest.items() if finite(value)]
    names.sort(key=lambda n: (not n.startswith("validation-"), n))
    return names[:most]


def latest_values(record: TrainingRecord, most: int) -> dict[str, float]:
    """The latest value of each chosen metric, by name."""
    return {name: record.log.latest[name] for name in chosen_metrics(record, most)}


def progress_text(record: TrainingRecord, *, finished: bool = False) -> str:
    """`epoch 7/20 35% ETA 14m, 1234 samples/s`, or what of it is known."""
    shown = record.progress
    if shown.epoch is None and shown.epochs_done == 0:
        words = "no epoch seen yet"
        words += f" of {shown.epochs}" if shown.epochs else ""
    else:
        words = f"epoch {shown.epoch or shown.epochs_done}"
        words += f"/{shown.epochs}" if shown.epochs else ""
    if shown.percent is not None:
        words += f" {shown.percent:g}%"
    if shown.eta_seconds is not None and not finished and shown.eta_seconds > 0:
        words += f" ETA {span(shown.eta_seconds)}"
    speed = record.log.throughput
    if speed is not None and finite(speed):
        words += f", {_amount(speed)} samples/s"
    return words


def metrics_text(record: TrainingRecord) -> str:
    """`validation-accuracy 0.912 (best 0.93), ...`, or "" with no metric."""
    best: Mapping[str, float] = record.log.best
    said = []
    for name in chosen_metrics(record):
        value = record.log.latest[name]
        words = f"{shown_name(name)} {number(value)}"
        if name in best and finite(best[name]) and best[name] != value:
            words += f" (best {number(best[name])})"
        said.append(words)
    return ", ".join(said)


def usage_text(record: TrainingRecord) -> str:
    """`ran 1h 2m, 0.5 GPU-hours, 2.1 CPU-core-hours (estimate)`, or "" without pods."""
    use = record.resources
    if use is None:
        return ""
    duration = record.duration_seconds
    words = f"ran {span(duration)}, " if duration is not None else ""
    words += f"{_amount(use.gpu_hours)} GPU-hours, {_amount(use.cpu_core_hours)} CPU-core-hours"
    return words + (" (estimate)" if use.estimate else "")


def lines(record: TrainingRecord, state: str) -> list[str]:
    """What the note says of a run: its progress, its metrics, and for a finished run
    what it used; each line at most `MAX_LINE` characters."""
    finished = state in FINISHED_STATES
    said = [f"training: {progress_text(record, finished=finished)}"]
    if metrics := metrics_text(record):
        said.append(f"metrics: {metrics}")
    if finished and (usage := usage_text(record)):
        said.append(usage)
    return [_cut(visible(line)) for line in said]


def one_line(record: TrainingRecord, state: str) -> str:
    """The record in one line: progress; metrics; use (a finished run's)."""
    finished = state in FINISHED_STATES
    parts = [progress_text(record, finished=finished), metrics_text(record)]
    if finished:
        parts.append(usage_text(record))
    return _cut(visible("; ".join(part for part in parts if part)))


def status_text(record: TrainingRecord, state: str) -> str:
    """The few words a commit status gives a run. It changes seldom, since each change
    is a status posted (GitHub keeps at most 1,000 per commit and context): a finished
    run's first metric (or nothing), a running one's progress in `STATUS_STEP` steps."""
    if state in FINISHED_STATES:
        names = chosen_metrics(record, 1)
        return f"{shown_name(names[0])} {number(record.log.latest[names[0]])}" if names else ""
    percent = record.progress.percent
    if percent is None:
        return ""
    return f"{int(percent // STATUS_STEP) * STATUS_STEP}% done"


def span(seconds: float) -> str:
    """`45s`, `14m`, `1h 2m`, `3d 4h`."""
    whole = math.ceil(seconds) if finite(seconds) and seconds > 0 else 0
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m"
    if whole < 86400:
        return f"{whole // 3600}h {whole % 3600 // 60}m"
    return f"{whole // 86400}d {whole % 86400 // 3600}h"


def _amount(value: float) -> str:
    """Hours or a speed: a few digits, never a long row of them."""
    if not finite(value):
        return "?"
    if value >= 100:
        return f"{value:.0f}" if value < 1e9 else f"{value:.3g}"
    return f"{value:.1f}" if value >= 1 else f"{value:.2g}"


def finite(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 1] + "…"
