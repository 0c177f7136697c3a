"""The record's two stored forms, and reading them back strictly.

- The note's (`note_json`): everything, the per-epoch series too, in at most
  `MAX_NOTE_BYTES`: past it the series are downsampled (evenly, first and last kept)
  to fewer points until it fits.
- The ledger's (`summary_json`): no series, no parser state; the final and best
  values of at most `MAX_SUMMARY_METRICS` metrics (validation ones first), in at most
  `MAX_SUMMARY_BYTES`, so a finished job's entry stays small (every sync LISTs the
  ledger).

Both are JSON objects with a version (`v`) and their form. Reading one back
(`read_record`) checks its whole shape: a wrong type, a name that is not plain, a
number that is not finite, an unknown key, a value out of bounds, or too many bytes
refuses it with `RecordShapeError`, one line saying where, never with the value
itself; the derived fields (percent, ETA, duration) are checked and recomputed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from mxgitops.errors import MxGitOpsError
from mxgitops.record.lines import MAX_EPOCH, NAME
from mxgitops.record.reading import MAX_METRICS, MAX_POINTS, TrainingLog
from mxgitops.record.resources import ResourceUse
from mxgitops.record.runrecord import TrainingRecord, downsample

VERSION = 1
MAX_NOTE_BYTES = 16 * 1024
MAX_SUMMARY_BYTES = 1024
MAX_SUMMARY_METRICS = 4
MAX_CLUSTER_CHARS = 63
_MAX_COUNT = 10**12
_MAX_HOURS = 1e12
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
_CLUSTER = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.\-]{{0,{MAX_CLUSTER_CHARS - 1}}}")


class RecordShapeError(MxGitOpsError):
    """A stored training record is not one this mxgitops writes: the message says
    where, in one line; the record is left out, nothing else fails."""


def note_json(record: TrainingRecord) -> str:
    """The note's form: within `MAX_NOTE_BYTES`."""
    points = MAX_POINTS
    while True:
        text = _dumps(_common(record, "note") | _series(record.log, points) | _read_until(record))
        if len(text.encode()) <= MAX_NOTE_BYTES or points <= 2:
            return text
        points //= 2


def summary_json(record: TrainingRecord) -> str:
    """The ledger's form: within `MAX_SUMMARY_BYTES`."""
    names = sorted(record.log.latest, key=lambda n: (not n.startswith("validation-"), n))
    for count in range(min(len(names), MAX_SUMMARY_METRICS), -1, -1):
        kept = set(names[:count])
        log = replace(
            record.log,
            latest={n: record.log.latest[n] for n in names if n in kept},
            best={n: record.log.best[n] for n in names if n in kept and n in record.log.best},
        )
        text = _dumps(_common(replace(record, log=log), "summary"))
        if len(text.encode()) <= MAX_SUMMARY_BYTES:
            return text
    return text  # no metric left: the fields around them are bounded far below


def _common(record: TrainingRecord, form: str) -> dict[str, Any]:
    log, shown, use = record.log, record.progress, record.resources
    return {
        "v": VERSION,
        "form": form,
        "cluster": record.cluster if _CLUSTER.fullmatch(record.cluster) else "",
        "duration_seconds": record.duration_seconds,
        "progress": {
            "epoch": log.epoch,
            "finished_epoch": log.finished,
            "step": log.step,
            "steps": log.steps,
            "epochs_said": log.epochs,
            "epochs_declared": record.declared_epochs,
            "epochs_done": shown.epochs_done,
            "epochs": shown.epochs,
            "percent": shown.percent,
            "eta_seconds": shown.eta_seconds,
        },
        "throughput": log.throughput,
        "final": dict(log.latest),
        "best": dict(log.best),
        "resources": None if use is None else _fields(use),
    }


def _series(log: TrainingLog, points: int) -> dict[str, Any]:
    return {
        "series": {
            name: [[e, v] for e, v in downsample(s, points).items()]
            for name, s in log.series.items()
        },
        "epoch_seconds": [[e, v] for e, v in downsample(log.epoch_seconds, points).items()],
        "stride": log.stride,
        "samples": log.samples,
    }


def _read_until(record: TrainingRecord) -> dict[str, Any]:
    return {"read_until": record.read_until} if _TIME.fullmatch(record.read_until) else {}


def _fields(use: ResourceUse) -> dict[str, Any]:
    return {
        "gpu_hours": use.gpu_hours,
        "cpu_core_hours": use.cpu_core_hours,
        "pods": use.pods,
        "estimate": use.estimate,
        "started": use.started,
        "finished": use.finished,
    }


def _dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), allow_nan=False)


def read_record(text: str) -> TrainingRecord:
    """The record a note or a ledger entry holds; `RecordShapeError` if not one of ours."""
    if len(text.encode("utf-8", "replace")) > MAX_NOTE_BYTES:
        raise RecordShapeError(f"training record: more than {MAX_NOTE_BYTES} bytes")
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        raise RecordShapeError("training record: not JSON") from None
    check = _Check()
    top = check.keys(data, "", _NOTE_KEYS)
    check.that(top["v"] == VERSION, "v", f"version {VERSION} expected")
    form = top["form"]
    check.that(form in ("note", "summary"), "form", "note or summary expected")
    if form == "summary":
        check.that(not (_NOTE_ONLY | {"read_until"}) & set(top), "", "a summary holds no series")
    else:
        check.that(set(top) >= _NOTE_ONLY, "", "a note holds its series")
    got = check.keys(top["progress"], "progress", _PROGRESS_KEYS)
    for key in ("eta_seconds", "percent"):  # derived, recomputed: checked, not kept
        check.number(got[key], f"progress.{key}", optional=True)
    check.number(top["duration_seconds"], "duration_seconds", optional=True)
    check.integer(got["epochs_done"], "progress.epochs_done", 0, MAX_EPOCH)
    check.integer(got["epochs"], "progress.epochs", 1, MAX_EPOCH, optional=True)
    log = TrainingLog(
        epoch=check.integer(got["epoch"], "progress.epoch", 1, MAX_EPOCH, optional=True),
        finished=check.boolean(got["finished_epoch"], "progress.finished_epoch"),
        step=check.integer(got["step"], "progress.step", 0, _MAX_COUNT, optional=True),
        steps=check.integer(got["steps"], "progress.steps", 1, _MAX_COUNT, optional=True),
        epochs=check.integer(got["epochs_said"], "progress.epochs_said", 1, MAX_EPOCH, True),
        throughput=check.number(top["throughput"], "throughput", optional=True),
        latest=check.metrics(top["final"], "final"),
        best=check.metrics(top["best"], "best"),
        series={
            name: check.points(points, f"series.{name}")
            for name, points in check.metrics(top.get("series", {}), "series", check.any).items()
        },
        epoch_seconds=check.points(top.get("epoch_seconds", []), "epoch_seconds"),
        stride=check.integer(top.get("stride", 1), "stride", 1, MAX_EPOCH),
        samples=check.integer(top.get("samples"), "samples", 0, _MAX_COUNT, optional=True),
    )
    cluster = check.text(top["cluster"], "cluster", _CLUSTER, empty=True)
    read_until = check.text(top.get("read_until", ""), "read_until", _TIME, empty=True)
    return TrainingRecord(
        log=log,
        declared_epochs=check.integer(
            got["epochs_declared"], "progress.epochs_declared", 1, MAX_EPOCH, optional=True
        ),
        cluster=cluster,
        resources=_resources(check, top["resources"]),
        read_until=read_until,
    )


_NOTE_ONLY = frozenset({"series", "epoch_seconds", "stride", "samples"})
_NOTE_KEYS = (
    {"v", "form", "cluster", "duration_seconds", "progress", "throughput", "final", "best"},
    {"resources", "read_until", *_NOTE_ONLY},
)
_PROGRESS_KEYS = (
    {"epoch", "finished_epoch", "step", "steps", "epochs_said", "epochs_declared"}
    | {"epochs_done", "epochs", "percent", "eta_seconds"},
    set[str](),
)
_RESOURCE_KEYS = (
    {"gpu_hours", "cpu_core_hours", "pods", "estimate", "started", "finished"},
    set[str](),
)


def _resources(check: _Check, value: object) -> ResourceUse | None:
    if value is None:
        return None
    got = check.keys(value, "resources", _RESOURCE_KEYS)
    return ResourceUse(
        gpu_hours=check.hours(got["gpu_hours"], "resources.gpu_hours"),
        cpu_core_hours=check.hours(got["cpu_core_hours"], "resources.cpu_core_hours"),
        pods=check.integer(got["pods"], "resources.pods", 0, _MAX_COUNT),
        estimate=check.boolean(got["estimate"], "resources.estimate"),
        started=check.text(got["started"], "resources.started", _TIME, empty=True),
        finished=check.text(got["finished"], "resources.finished", _TIME, empty=True),
    )


def _refuse_constant(constant: str) -> None:
    raise ValueError(constant)


class _Check:
    """Each check returns the value it checked, or raises `RecordShapeError` naming
    the path (names in it are checked plain before they are shown)."""

    def fail(self, path: str, why: str) -> RecordShapeError:
        return RecordShapeError(f"training record: {path or 'the top'}: {why}")

    def that(self, holds: bool, path: str, why: str) -> None:
        if not holds:
            raise self.fail(path, why)

    def keys(
        self, value: object, path: str, allowed: tuple[set[str], set[str]] | tuple[Any, Any]
    ) -> dict[str, Any]:
        required, optional = allowed
        if not isinstance(value, dict):
            raise self.fail(path, "an object expected")
        missing, unknown = required - set(value), set(value) - required - optional
        if missing:
            raise self.fail(path, f"missing {', '.join(sorted(missing))}")
        if unknown:
            raise self.fail(path, f"{len(unknown)} unknown key(s)")
        return value

    def integer(
        self, value: object, path: str, least: int, most: int, optional: bool = False
    ) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
            raise self.fail(path, f"an integer from {least} to {most} expected")
        return value

    def number(self, value: object, path: str, optional: bool = False) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(path, "a number expected")
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise self.fail(path, "a finite number expected")
        return number

    def hours(self, value: object, path: str) -> float:
        number: float = self.number(value, path)
        self.that(0 <= number <= _MAX_HOURS, path, "hours from 0 expected")
        return number

    def boolean(self, value: object, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, "true or false expected")
        return value

    def text(self, value: object, path: str, shape: re.Pattern[str], empty: bool) -> str:
        if not isinstance(value, str) or not (shape.fullmatch(value) or (empty and not value)):
            raise self.fail(path, "a plain name or time expected")
        return value

    def any(self, value: object, path: str) -> Any:
        return value

    def metrics(
        self, value: object, path: str, each: Callable[[object, str], Any] | None = None
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, "an object expected")
        if len(value) > MAX_METRICS:
            raise self.fail(path, f"more than {MAX_METRICS} metrics")
        for name in value:
            if not NAME.fullmatch(name):
                raise self.fail(path, "a metric name that is not plain")
        check = each or self.number
        return {name: check(item, f"{path}.{name}") for name, item in value.items()}

    def points(self, value: object, path: str) -> dict[int, float]:
        if not isinstance(value, list) or len(value) > MAX_POINTS:
            raise self.fail(path, f"a list of at most {MAX_POINTS} points expected")
        points: dict[int, float] = {}
        for index, point in enumerate(value):
            if not isinstance(point, list) or len(point) != 2:
                raise self.fail(f"{path}[{index}]", "an [epoch, value] pair expected")
            epoch = self.integer(point[0], f"{path}[{index}]", 1, MAX_EPOCH)
            points[epoch] = self.number(point[1], f"{path}[{index}]")
        return points
