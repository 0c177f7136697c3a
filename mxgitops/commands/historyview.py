"""The runs of a job as a table, JSON or Markdown, and sorted by a metric.

One metric is the table's: `--metric NAME`, else the first validation metric of the
newest run with a record (the one `status` shows), else its first metric; a run shows its
final and best value of it. JSON carries every final and best metric of each run.

Everything from git (authors, the manifest's values in the spec change) and from the
notes (metric names, states) is someone else's text: bounded, on one line, control
characters shown as escapes (`markdown.visible`) on a terminal and in JSON (a bidi
override or a line separator is valid JSON, and hides or breaks lines where the JSON
is shown), inert code spans (`markdown.code`) in Markdown.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mxgitops.commands.history import Run
from mxgitops.outputs.markdown import code, text, visible
from mxgitops.outputs.recordtext import duration, key_metric, shown_value
from mxgitops.record.reading import lower_is_better
from mxgitops.record.runrecord import TrainingRecord

MAX_AUTHOR = 40
MAX_CHANGE = 80
MAX_STATE = 30
MAX_JSON_TEXT = 300  # characters of git's or a note's text in JSON, escapes shown
_VALIDATION = "validation-"
HEADER = (
    "COMMIT",
    "AUTHOR",
    "DATE (UTC)",
    "CHANGE",
    "OUTCOME",
    "DURATION",
    "GPU-H",
    "FINAL",
    "BEST",
)


@dataclass(frozen=True)
class Shown:
    """What `history` shows: the runs (newest first, or best first by `metric`) and the
    metric of the FINAL and BEST columns ("" when no run has a record with one)."""

    job: str
    runs: tuple[Run, ...]
    metric: str
    sorted_by_metric: bool = False


def shown(job: str, runs: Sequence[Run], metric: str | None) -> Shown:
    """The runs to show: by `metric` (best first, runs without it last, newest first
    among those) when given, else newest first with the headline metric."""
    if not metric:
        return Shown(job, tuple(runs), _headline(runs))
    name = metric.lower()

    def rank(run: Run) -> tuple[int, float]:
        best = metric_value(run.record, name, "best")
        if best is None:
            return (1, 0.0)
        return (0, best if lower_is_better(resolved(run.record, name)) else -best)

    ordered = sorted(runs, key=rank)  # stable: newest first among equals
    named = next((resolved(run.record, name) for run in ordered if run.record), name)
    return Shown(job, tuple(ordered), named, sorted_by_metric=True)


def resolved(record: TrainingRecord | None, name: str) -> str:
    """The record's name for `name`: itself, or its validation metric (`accuracy`,
    `val-accuracy` -> `validation-accuracy`) when the record has no metric of that name."""
    if record is None or name in record.log.latest:
        return name
    bare = name.removeprefix("val-").removeprefix(_VALIDATION)
    for candidate in (_VALIDATION + bare, bare):
        if candidate in record.log.latest:
            return candidate
    return name


def metric_value(record: TrainingRecord | None, name: str, which: str) -> float | None:
    """The final ("final") or best ("best") value of `name` in `record`."""
    if record is None:
        return None
    values = record.log.latest if which == "final" else record.log.best
    return values.get(resolved(record, name))


def _headline(runs: Sequence[Run]) -> str:
    return next((key_metric(run.record) for run in runs if run.record is not None), "")


# -- text --------------------------------------------------------------------------------


def render_table(view: Shown) -> str:
    rows = [HEADER, *(_cells(view, run) for run in view.runs)]
    rows = [tuple(visible(cell) for cell in row) for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(*rows, strict=True)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    title = f"runs of {visible(view.job)}"
    if view.metric:
        order = "best first" if view.sorted_by_metric else "newest first"
        title += f", {order}; FINAL and BEST: {visible(view.metric)}"
    return "\n".join([title, "", *lines])


def _cells(view: Shown, run: Run) -> tuple[str, ...]:
    record = run.record
    use = record.resources if record else None
    return (
        run.commit[:7],
        _cut(run.author, MAX_AUTHOR),
        _utc(run.date),
        _cut("; ".join(run.spec_change), MAX_CHANGE),
        _cut(run.state, MAX_STATE) or "-",
        duration(record.duration_seconds)
        if record and record.duration_seconds is not None
        else "-",
        _hours(use.gpu_hours, use.estimate) if use else "-",
        _number(metric_value(record, view.metric, "final")),
        _number(metric_value(record, view.metric, "best")),
    )


def _utc(date: str) -> str:
    """An RFC 3339 date as `2026-12-07 05:20` UTC (git's as given when it is not one)."""
    try:
        return datetime.fromisoformat(date).astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return _cut(date, 25)


def _hours(hours: float, estimate: bool) -> str:
    return ("~" if estimate else "") + f"{hours:.3g}"


def _number(value: float | None) -> str:
    return "-" if value is None else shown_value(value)


def _cut(value: str, most: int) -> str:
    return value if len(value) <= most else value[: most - 1] + "…"


# -- JSON --------------------------------------------------------------------------------


def render_json(view: Shown) -> str:
    return json.dumps(
        {"job": view.job, "metric": view.metric or None, "runs": [_run(run) for run in view.runs]},
        indent=2,
        ensure_ascii=False,
        allow_nan=False,
    )


def _run(run: Run) -> dict[str, Any]:
    record = run.record
    use = record.resources if record else None
    return {
        "commit": run.commit,
        "short": run.commit[:7],
        "author": _cut(visible(run.author), MAX_JSON_TEXT),
        "date": run.date,
        "spec_change": [_cut(visible(change), MAX_JSON_TEXT) for change in run.spec_change],
        "outcome": _cut(visible(run.state), MAX_JSON_TEXT) or None,
        "synced_commit": run.synced_commit or None,
        "started": (record.started or None) if record else None,
        "finished": (record.finished or None) if record else None,
        "duration_seconds": record.duration_seconds if record else None,
        "gpu_hours": use.gpu_hours if use else None,
        "cpu_core_hours": use.cpu_core_hours if use else None,
        "resources_estimate": use.estimate if use else None,
        "final": dict(record.log.latest) if record else {},
        "best": dict(record.log.best) if record else {},
    }


# -- Markdown ----------------------------------------------------------------------------


def render_markdown(view: Shown) -> str:
    header = (
        "| "
        + " | ".join(
            h.capitalize().replace("Gpu-h", "GPU-hours").replace("(utc)", "(UTC)") for h in HEADER
        )
        + " |"
    )
    lines = [header, "|" + "---|" * len(HEADER)]
    for run in view.runs:
        commit, author, date, change, outcome, *ours = _cells(view, run)
        cells = (
            code(commit, table=True),
            text(author, table=True),
            text(date, table=True),
            code(change, table=True),
            text(outcome, table=True),
            *ours,  # figures this module wrote: digits, units, "~", "-"
        )
        lines.append("| " + " | ".join(cells) + " |")
    title = f"**Runs of {code(view.job)}**"
    if view.metric:
        title += f" (final and best {code(view.metric)})"
    return "\n".join([title, "", *lines]) + "\n"
