"""Training curves as server-drawn SVG: one line per run, one point per recorded epoch.

Only geometry is computed here (pure); `templates/curves.svg.html` draws it, escaped
like every other template. Each point keeps its epoch and value, written on the
circle as `data-epoch` and `data-value`, so that what the chart says can be read back
from the page. A record keeps at most 64 points per metric (`record.reading`), and
at most `MAX_RUNS` runs are drawn: a chart has a bounded size whatever the notes say.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 40  # margins, for the axes' labels
MAX_RUNS = 8
TICKS = 5


@dataclass(frozen=True)
class Point:
    epoch: int
    value: float
    x: float
    y: float


@dataclass(frozen=True)
class Line:
    label: str  # the run: its commit's short id
    points: tuple[Point, ...]
    colour: int  # a class index, 0 to MAX_RUNS - 1 (the stylesheet's colours)

    @property
    def path(self) -> str:
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in self.points)


@dataclass(frozen=True)
class Tick:
    at: float  # x or y, in the chart's coordinates
    label: str
    value: float = 0.0  # what a value axis' tick stands for, unrounded


@dataclass(frozen=True)
class Chart:
    metric: str
    lines: tuple[Line, ...]
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    bottom: int = HEIGHT - BOTTOM
    right: int = WIDTH - RIGHT
    top: int = TOP


def chart(metric: str, runs: Sequence[tuple[str, Mapping[int, float]]]) -> Chart | None:
    """The chart of `metric` for `runs` (label, value by epoch), the first `MAX_RUNS`
    that have points; None when none has."""
    drawn = [(label, points) for label, points in runs if points][:MAX_RUNS]
    if not drawn:
        return None
    epochs = [epoch for _, points in drawn for epoch in points]
    values = [value for _, points in drawn for value in points.values()]
    low_x, high_x = min(epochs), max(epochs)
    low_y, high_y = _padded(min(values), max(values))
    if low_x == high_x:
        low_x, high_x = low_x - 1, high_x + 1

    def x_of(epoch: float) -> float:
        return LEFT + (epoch - low_x) * (WIDTH - LEFT - RIGHT) / (high_x - low_x)

    def y_of(value: float) -> float:
        return HEIGHT - BOTTOM - (value - low_y) * (HEIGHT - TOP - BOTTOM) / (high_y - low_y)

    lines = tuple(
        Line(
            label=label,
            points=tuple(
                Point(epoch, value, x_of(epoch), y_of(value))
                for epoch, value in sorted(points.items())
            ),
            colour=index,
        )
        for index, (label, points) in enumerate(drawn)
    )
    x_ticks = tuple(Tick(x_of(epoch), str(epoch)) for epoch in _epoch_ticks(low_x, high_x))
    y_ticks = tuple(
        Tick(y_of(value), _short(value), value)
        for value in (low_y + i * (high_y - low_y) / (TICKS - 1) for i in range(TICKS))
    )
    return Chart(metric=metric, lines=lines, x_ticks=x_ticks, y_ticks=y_ticks)


def _padded(low: float, high: float) -> tuple[float, float]:
    """The value axis' range: the values', a little wider so no point sits on the edge."""
    if high == low:
        spread = abs(low) * 0.1 or 1.0
        return low - spread, high + spread
    margin = (high - low) * 0.05
    return low - margin, high + margin


def _epoch_ticks(low: int, high: int) -> list[int]:
    step = max(1, math.ceil((high - low) / (TICKS - 1)))
    return list(range(max(low, 1) if low >= 1 else low, high + 1, step))


def _short(value: float) -> str:
    return f"{value:.4g}"
