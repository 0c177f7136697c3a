"""A log read a chunk at a time across syncs (mxgitops/record/reading.py): overlapping
chunks give what one read of the whole gives, a cut last line waits, and the series
stay bounded."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from mxgitops.record.progressline import progress_line
from mxgitops.record.reading import MAX_METRICS, MAX_POINTS, TrainingLog, read

LOGS = Path(__file__).parents[1] / "data" / "training-logs"
NAMES = sorted(p.name for p in LOGS.glob("*.log"))


@pytest.mark.parametrize("name", NAMES)
def test_every_split_with_overlap_reads_as_the_whole(name: str) -> None:
    lines = (LOGS / name).read_text().splitlines(keepends=True)
    whole = read(TrainingLog(), "".join(lines))
    for cut in range(len(lines) + 1):
        for overlap in (0, 1, 3, cut):  # sinceTime gives the last second's lines again
            first = read(TrainingLog(), "".join(lines[:cut]))
            second = read(first, "".join(lines[max(0, cut - overlap) :]))
            assert second == whole, (cut, overlap)


def test_reading_the_same_chunk_again_changes_nothing() -> None:
    text = (LOGS / "mxnet-1.9.1-module-fit.log").read_text()
    once = read(TrainingLog(), text)
    assert read(once, text) == once


def test_a_cut_last_line_waits_for_its_end() -> None:
    cut = "Epoch[0] Validation-accuracy=0.3"  # limitBytes cut 0.335938
    log = read(TrainingLog(), "Epoch[0] Time cost=0.154\n" + cut)
    assert "validation-accuracy" not in log.latest
    log = read(log, cut + "35938\n")
    assert log.latest["validation-accuracy"] == 0.335938
    assert read(TrainingLog(), cut, at_end=True).latest == {"validation-accuracy": 0.3}


def test_the_series_stay_bounded_evenly_keeping_first_and_last() -> None:
    epochs = 1000
    log = TrainingLog()
    for epoch in range(epochs):  # one sync per epoch
        log = read(log, f"Epoch[{epoch}] Validation-accuracy={epoch / epochs:f}\n")
    points = log.series["validation-accuracy"]
    assert len(points) <= MAX_POINTS
    kept = sorted(points)
    assert kept[0] == 1 and kept[-1] == epochs
    inner = kept[1:-1]
    assert {b - a for a, b in pairwise(inner)} == {log.stride}
    assert log.best["validation-accuracy"] == (epochs - 1) / epochs  # the best of all
    thinned = next(e for e in range(2, epochs) if e not in points)
    again = read(log, f"Epoch[{thinned - 1}] Validation-accuracy=0.5\n")
    assert again.series == log.series  # a thinned epoch read again stays out


def test_at_most_max_metrics_names_the_first_seen() -> None:
    text = "".join(f"Epoch[0] Validation-m{i}=0.5\n" for i in range(MAX_METRICS * 3))
    log = read(TrainingLog(), text)
    assert sorted(log.latest) == sorted(f"validation-m{i}" for i in range(MAX_METRICS))
    assert len(log.series) == MAX_METRICS


def test_best_is_the_highest_accuracy_and_the_lowest_loss() -> None:
    text = "".join(
        progress_line(e, epochs=3, metrics={"accuracy": a, "loss": lo, "top-5-error": er}) + "\n"
        for e, a, lo, er in [(1, 0.5, 0.9, 0.4), (2, 0.8, 0.4, 0.2), (3, 0.7, 0.6, 0.3)]
    )
    log = read(TrainingLog(), text)
    assert log.best == {"accuracy": 0.8, "loss": 0.4, "top-5-error": 0.2}
    assert log.latest == {"accuracy": 0.7, "loss": 0.6, "top-5-error": 0.3}
