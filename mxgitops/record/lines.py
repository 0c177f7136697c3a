"""Which log lines say something about training, and what: MXNet's standard lines, as
MXNet 1.9.1 prints them, and the opt-in progress line (`progressline.py`).

A log is written by whatever runs in the pod, so a line is untrusted text: it is
cleaned of ANSI sequences and control characters, a line longer than `MAX_LINE_CHARS`
is skipped whole (a cut line could say something the program never printed), names
must be short and plain (`NAME`), numbers short, epochs and batches bounded, and
values that are not finite (`nan`, `inf`, `1e999`) are dropped. Whatever a line
holds, `recognise` returns a `Seen` or None; it never raises.

The formats (tests/data/training-logs/ holds MXNet's own output):
- `Speedometer`: `Epoch[E] Batch [B1-B2]\\tSpeed: S samples/sec\\tname=value...`, the
  `Batch [B]` form of older MXNet, and `Iter[E] Batch [B]\\tSpeed: ...` (no metric);
- `Module.fit`: `Epoch[E] Train-name=value`, `Epoch[E] Time cost=T`,
  `Epoch[E] Validation-name=value` (and `Iter[E] Batch[B] Train-name=value`);
- the Gluon estimator's `LoggingHandler`: `Train for N epochs.`,
  `[Epoch E] Begin, current learning rate: L`,
  `[Epoch E][Batch B][Samples N] time/interval: Ts name: value, ...`,
  `[Epoch E] Finished in Ts, name: value, ...`, `Train finished using total Ts with
  N epochs. name: value, ...`. Its validation pass prints its own
  `[Epoch 0] Finished ...` line with validation metrics only, whatever the epoch: that
  line is skipped (the epoch's own line that follows carries the same values).

Anything may stand before a recognised line (a time, a level, `INFO:root:`, kubectl's
timestamp). Epochs are counted from 1 here: MXNet's `Epoch[0]` is epoch 1.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from mxgitops.record.progressline import PREFIX, read_progress_json

MAX_LINE_CHARS = 8192  # a Speedometer line with 100 metrics is ~3,000
MAX_NAME_CHARS = 40
MAX_EPOCH = 1_000_000
MAX_BATCH = 10**12
MAX_METRICS_PER_LINE = 64

# A metric's name once read: plain characters only, so it can be shown anywhere
# (markdown, HTML, a terminal) without being markup or an escape.
NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.\-/@]{{0,{MAX_NAME_CHARS - 1}}}")
_NUMBER = r"[-+]?(?:\d{1,30}(?:\.\d{0,30})?|\.\d{1,30})(?:[eE][-+]?\d{1,4})?|[-+]?(?:nan|inf)"
_INT = r"\d{1,13}"
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_START = r"(?<![A-Za-z0-9_\[])"  # a recognised line starts at a word's start

_SPEEDOMETER = re.compile(
    _START + rf"(?:Epoch|Iter)\[({_INT})\] Batch \[(?:({_INT})-)?({_INT})\]"
    rf"\s+Speed: ({_NUMBER}) samples/sec((?:\t[^\t]*)*)\s*$"
)
_EPOCH_METRIC = re.compile(
    _START + rf"Epoch\[({_INT})\] (Train|Validation)-([^\s=]{{1,64}})=({_NUMBER})\s*$"
)
_BATCH_METRIC = re.compile(
    _START + rf"Iter\[({_INT})\] Batch\[({_INT})\] Train-([^\s=]{{1,64}})=({_NUMBER})\s*$"
)
_TIME_COST = re.compile(_START + rf"Epoch\[({_INT})\] Time cost=({_NUMBER})\s*$")
_GLUON_TOTAL = re.compile(_START + rf"Train for ({_INT}) epochs\.\s*$")
_GLUON_BATCH = re.compile(
    rf"\[Epoch ({_INT})\]\[Batch ({_INT})\]\[Samples ({_INT})\] "
    rf"time/interval: ({_NUMBER})s (.*)$"
)
_GLUON_BEGIN = re.compile(rf"\[Epoch ({_INT})\] Begin, current learning rate: {_NUMBER}\s*$")
_GLUON_EPOCH = re.compile(rf"\[Epoch ({_INT})\] Finished in ({_NUMBER})s(?:, (.*))?$")
_GLUON_END = re.compile(
    _START + rf"Train finished using total {_INT}s with ({_INT}) epochs\.(?: (.*))?$"
)
_PROGRESS = re.compile(_START + re.escape(PREFIX) + r"(\{.*\})\s*$")

_PHASES = {"train": "train", "training": "train", "validation": "validation"}


@dataclass(frozen=True)
class Seen:
    """What one line says. `epoch` counts from 1; `finished`: the epoch ended with
    this line; `epoch_level`: its metrics are the epoch's (kept per epoch, and the
    best), not a batch's running values (kept only as the latest)."""

    epoch: int | None = None
    batch: int | None = None
    finished: bool = False
    epochs: int | None = None  # the total the program says it will run
    steps: int | None = None  # steps per epoch (the opt-in line)
    epoch_seconds: float | None = None
    speed: float | None = None  # samples per second
    samples: int | None = None  # samples so far (Gluon's batch line)
    interval_seconds: float | None = None  # the time those samples' interval took
    metrics: tuple[tuple[str, float], ...] = ()
    epoch_level: bool = False


def clean(line: str) -> str:
    """`line` without ANSI sequences and control characters (a tab stays: it is the
    Speedometer's separator)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", line))


def recognise(raw: str) -> Seen | None:
    """What `raw` (one line, without its newline) says about training, if anything."""
    if len(raw) > MAX_LINE_CHARS:
        return None
    line = clean(raw)
    seen = None
    if "Epoch" in line or "Iter[" in line:
        seen = _mxnet(line)
    if seen is None and "Train f" in line:
        seen = _gluon_frame(line)
    if seen is None and PREFIX in line and (match := _PROGRESS.search(line)):
        seen = _from_progress(match.group(1))
    return seen


def _mxnet(line: str) -> Seen | None:
    if match := _SPEEDOMETER.search(line):
        epoch, _, batch, speed, tail = match.groups()
        return _seen(
            epoch,
            batch=_bounded(batch, MAX_BATCH),
            speed=_duration(speed),
            metrics=_pairs(tail.split("\t"), "=", "train"),
        )
    if match := _EPOCH_METRIC.search(line):
        epoch, phase, name, value = match.groups()
        return _seen(
            epoch, finished=True, metrics=_metric(phase.lower(), name, value), epoch_level=True
        )
    if match := _TIME_COST.search(line):
        return _seen(match.group(1), finished=True, epoch_seconds=_duration(match.group(2)))
    if match := _BATCH_METRIC.search(line):
        epoch, batch, name, value = match.groups()
        return _seen(epoch, batch=_bounded(batch, MAX_BATCH), metrics=_metric("train", name, value))
    if match := _GLUON_BATCH.search(line):
        epoch, batch, samples, seconds, tail = match.groups()
        return _seen(
            epoch,
            batch=_bounded(batch, MAX_BATCH),
            samples=_bounded(samples, MAX_BATCH),
            interval_seconds=_duration(seconds),
            metrics=_pairs(tail.split(", "), ": ", None),
        )
    if match := _GLUON_BEGIN.search(line):
        return _seen(match.group(1))
    if match := _GLUON_EPOCH.search(line):
        epoch, seconds, tail = match.groups()
        metrics = _pairs((tail or "").split(", "), ": ", None)
        if metrics and all(name.startswith("validation-") for name, _ in metrics):
            return None  # the validation pass's own line: its epoch is always 0
        return _seen(
            epoch,
            finished=True,
            epoch_seconds=_duration(seconds),
            metrics=metrics,
            epoch_level=True,
        )
    return None


def _gluon_frame(line: str) -> Seen | None:
    if match := _GLUON_TOTAL.search(line):
        epochs = _bounded(match.group(1), MAX_EPOCH)
        return Seen(epochs=epochs) if epochs else None
    if match := _GLUON_END.search(line):
        done = _bounded(match.group(1), MAX_EPOCH)
        if not done:
            return None
        metrics = _pairs((match.group(2) or "").split(", "), ": ", None)
        return Seen(epoch=done, finished=True, metrics=metrics)
    return None


def _from_progress(text: str) -> Seen | None:
    said = read_progress_json(text)
    if said is None:
        return None
    metrics = tuple(
        (name, number)
        for name, number in list(said.metrics.items())[:MAX_METRICS_PER_LINE]
        if NAME.fullmatch(name) and math.isfinite(number)
    )
    finished = said.step is None or (said.steps is not None and said.step >= said.steps)
    return Seen(
        epoch=said.epoch,
        batch=said.step,
        finished=finished,
        epochs=said.epochs,
        steps=said.steps,
        epoch_seconds=said.epoch_seconds,
        speed=said.samples_per_sec,
        metrics=metrics,
        epoch_level=finished,
    )


def _seen(index: str, **facts: Any) -> Seen | None:
    """A `Seen` for MXNet's 0-based epoch `index`, or None past the bounds."""
    number = _bounded(index, MAX_EPOCH - 1)
    return None if number is None else Seen(epoch=number + 1, **facts)


def _pairs(items: list[str], separator: str, phase: str | None) -> tuple[tuple[str, float], ...]:
    """`name<separator>value` items as metrics; a Gluon name (`phase` None) starts with
    its phase (`training accuracy`), a Speedometer one is the training's running value."""
    found: list[tuple[str, float]] = []
    for item in items[:MAX_METRICS_PER_LINE]:
        name, sep, value = item.strip().rpartition(separator)
        if not sep:
            continue
        if phase is None:
            first, _, rest = name.partition(" ")
            found.extend(_metric(first, "-".join(rest.split()), value, gluon=True))
        else:  # MXNet before 1.0 named a Speedometer's metric `Train-accuracy`
            found.extend(_metric(phase, name.removeprefix("Train-"), value))
    return tuple(dict(found).items())


def _metric(
    phase: str, name: str, value: str, *, gluon: bool = False
) -> tuple[tuple[str, float], ...]:
    """One metric as `phase-name`, or none: a name not plain, a value not finite."""
    number = _finite(value)
    known = _PHASES.get(phase.lower())
    if gluon and known is None:  # a Gluon metric not named by its phase
        full = f"{phase}-{name}" if name else phase
    else:
        full = f"{known}-{name}" if known and name else ""
    if number is None or len(full) > MAX_NAME_CHARS or not NAME.fullmatch(full):
        return ()
    return ((full, number),)


def _finite(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _duration(text: str | None) -> float | None:
    """A time or a speed: finite and not negative."""
    number = _finite(text)
    return number if number is not None and number >= 0 else None


def _bounded(text: str | None, most: int) -> int | None:
    if text is None:
        return None
    number = int(text)
    return number if number <= most else None
