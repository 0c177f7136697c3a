"""What a run's log has shown so far, read a chunk at a time across syncs.

A sync reads a bounded chunk of worker 0's log (`sinceTime`, `limitBytes`: the
caller's) and folds it into what earlier syncs read: `read(log, chunk)`. Chunks
overlap (a `sinceTime` read gives the last second's lines again), so every fact is
kept by its epoch and a line read twice sets the same value twice: nothing is
counted, so nothing counts twice. A last line without its newline is left for the
next chunk (a cut `Validation-accuracy=0.3` would be a value never printed), unless
`at_end` says the log is complete.

Bounded whatever the log says: at most `MAX_METRICS` names (the first seen), and per
name at most `MAX_POINTS` epochs: past it, the series keep every other epoch (the
first and the last always), the same epochs for every name, so a thinned epoch read
again stays out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mxgitops.record.lines import Seen, recognise

MAX_METRICS = 16
MAX_POINTS = 64

Series = Mapping[int, float]  # by epoch, counted from 1

# A name says which way is better: these fragments mean lower is (a loss, an error);
# every other metric (accuracy, f1, auc, mcc, top_k_accuracy...) is better higher.
LOWER_IS_BETTER = ("loss", "error", "entropy", "perplexity", "mse", "mae", "rmse", "nll")


def lower_is_better(name: str) -> bool:
    lowered = name.lower()
    return any(fragment in lowered for fragment in LOWER_IS_BETTER)


@dataclass(frozen=True)
class TrainingLog:
    """What the log has said. `epoch` is the one the latest line was about and
    `finished` whether that line ended it; `epochs` the total the program said."""

    epoch: int | None = None
    finished: bool = False
    step: int | None = None
    steps: int | None = None
    epochs: int | None = None
    throughput: float | None = None  # samples per second, the latest printed
    latest: Mapping[str, float] = field(default_factory=dict)
    best: Mapping[str, float] = field(default_factory=dict)
    series: Mapping[str, Series] = field(default_factory=dict)
    epoch_seconds: Series = field(default_factory=dict)
    stride: int = 1  # the series keep epochs divisible by it (and the first and last)
    samples: int | None = None  # Gluon: the samples its latest batch line counted

    @property
    def epochs_done(self) -> int:
        if self.epoch is None:
            return 0
        return self.epoch if self.finished else self.epoch - 1


def read(log: TrainingLog, chunk: str, *, at_end: bool = False) -> TrainingLog:
    """`log` with what `chunk` (the next part of the log, whole lines) adds."""
    lines = chunk.split("\n")
    if not at_end:
        lines.pop()  # the text after the last newline: not a whole line yet
    folding = _Folding(log)
    for line in lines:
        seen = recognise(line)
        if seen is not None:
            folding.add(seen)
    return folding.result()


class _Folding:
    """`read`'s working copy of a log (the record stays frozen)."""

    def __init__(self, log: TrainingLog) -> None:
        self.log = log
        self.latest = dict(log.latest)
        self.best = dict(log.best)
        self.series = {name: dict(points) for name, points in log.series.items()}
        self.epoch_seconds = dict(log.epoch_seconds)
        self.stride = log.stride
        self.position = (log.epoch, log.finished, log.step)
        self.steps, self.epochs, self.throughput = log.steps, log.epochs, log.throughput
        self.samples = log.samples

    def add(self, seen: Seen) -> None:
        if seen.epochs is not None:
            self.epochs = seen.epochs
        if seen.steps is not None:
            self.steps = seen.steps
        if seen.epoch is not None:
            self.position = (seen.epoch, seen.finished, seen.batch)
            if seen.epoch_seconds is not None:
                self._keep(self.epoch_seconds, seen.epoch, seen.epoch_seconds)
        if seen.speed is not None:
            self.throughput = seen.speed
        self._gluon_speed(seen)
        for name, value in seen.metrics:
            if name not in self.latest and len(self.latest) >= MAX_METRICS:
                continue
            self.latest[name] = value
            if seen.epoch_level and seen.epoch is not None:
                self._keep(self.series.setdefault(name, {}), seen.epoch, value)
                best = self.best.get(name)
                better = min if lower_is_better(name) else max
                self.best[name] = value if best is None else better(best, value)

    def _gluon_speed(self, seen: Seen) -> None:
        """Samples per second between two Gluon batch lines: the samples between them
        over the time their interval took (a line read again has fewer samples than
        the one before it: no speed from it)."""
        if seen.samples is None:
            return
        previous, self.samples = self.samples, seen.samples
        seconds = seen.interval_seconds
        if previous is not None and seconds and seconds > 0 and seen.samples > previous:
            self.throughput = (seen.samples - previous) / seconds

    def _keep(self, points: dict[int, float], epoch: int, value: float) -> None:
        points[epoch] = value
        _thin(points, self.stride)
        if len(points) > MAX_POINTS:
            while len(points) > MAX_POINTS:
                self.stride *= 2
                _thin(points, self.stride)
            for other in (*self.series.values(), self.epoch_seconds):
                _thin(other, self.stride)

    def result(self) -> TrainingLog:
        epoch, finished, step = self.position
        return TrainingLog(
            epoch=epoch,
            finished=finished,
            step=step,
            steps=self.steps,
            epochs=self.epochs,
            throughput=self.throughput,
            latest=self.latest,
            best=self.best,
            series={name: dict(sorted(p.items())) for name, p in self.series.items() if p},
            epoch_seconds=dict(sorted(self.epoch_seconds.items())),
            stride=self.stride,
            samples=self.samples,
        )


def _thin(points: dict[int, float], stride: int) -> None:
    """Keep the epochs divisible by `stride`, and the first and the last."""
    if stride == 1 or len(points) <= 2:
        return
    first, last = min(points), max(points)
    for epoch in [e for e in points if e % stride and e not in (first, last)]:
        del points[epoch]
