"""A log is written by whatever runs in the pod (issue 45): huge numbers, NaN/inf,
thousands of metric names, lines megabytes long, ANSI and control characters,
markdown and HTML, forged lines. Whatever it holds, reading it never raises and
everything kept is bounded, plain and finite; the stored forms stay in their bytes
and read back. Hypothesis runs derandomized: the same examples on every run."""

from __future__ import annotations

import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mxgitops.record.lines import MAX_LINE_CHARS, NAME, recognise
from mxgitops.record.reading import MAX_METRICS, MAX_POINTS, TrainingLog, read
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.record.stored import (
    MAX_NOTE_BYTES,
    MAX_SUMMARY_BYTES,
    note_json,
    read_record,
    summary_json,
)

LOGS = Path(__file__).parents[1] / "data" / "training-logs"
REAL = sorted({line for p in LOGS.glob("*.log") for line in p.read_text().splitlines()})

NUMBERS = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "1e999", "-1e999", "9" * 40, "1e-999", "0"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(10**60), 10**60).map(str),
)
NAMES = st.one_of(
    st.sampled_from(
        [
            "accuracy",
            "<script>alert(1)</script>",
            "**bold**",
            "[x](javascript:alert(1))",
            "a\x1b[31mred",
            "a|b",
            "name with spaces",
            "é",
            "x" * 500,
            "`code`",
            "a=b",
        ]
    ),
    st.text(min_size=1, max_size=60),
)
HOSTILE = st.one_of(
    st.sampled_from(REAL),
    st.builds("Epoch[{}] Validation-{}={}".format, st.integers(-5, 10**15), NAMES, NUMBERS),
    st.builds("Epoch[{}] Time cost={}".format, st.integers(0, 10**15), NUMBERS),
    st.builds(
        "Epoch[{}] Batch [{}]\tSpeed: {} samples/sec\t{}".format,
        st.integers(0, 10**7),
        st.integers(0, 10**15),
        NUMBERS,
        st.lists(st.builds("{}={}".format, NAMES, NUMBERS), max_size=80).map("\t".join),
    ),
    st.builds(
        "[Epoch {}][Batch {}][Samples {}] time/interval: {}s {}".format,
        st.integers(0, 10**7),
        st.integers(0, 10**7),
        st.integers(0, 10**15),
        NUMBERS,
        st.lists(st.builds("training {}: {}".format, NAMES, NUMBERS), max_size=20).map(", ".join),
    ),
    st.builds(
        'MXGITOPS_PROGRESS {{"epoch": {}, "epochs": {}, "step": {}, "steps": {}, '
        '"metrics": {{"{}": {}}}}}'.format,
        st.integers(-1, 10**9),
        st.integers(-1, 10**9),
        st.integers(-1, 10**13),
        st.integers(-1, 10**13),
        NAMES,
        NUMBERS,
    ),
    st.text(max_size=200),
)


def _assert_bounded(log: TrainingLog) -> None:
    assert len(log.latest) <= MAX_METRICS and len(log.series) <= MAX_METRICS
    for metrics in (log.latest, log.best):
        assert all(NAME.fullmatch(name) for name in metrics)
        assert all(math.isfinite(value) for value in metrics.values())
    for points in (*log.series.values(), log.epoch_seconds):
        assert len(points) <= MAX_POINTS
        assert all(math.isfinite(value) for value in points.values())
    assert log.throughput is None or 0 <= log.throughput < math.inf
    assert all(seconds >= 0 for seconds in log.epoch_seconds.values())


@settings(
    derandomize=True,
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(chunks=st.lists(st.lists(HOSTILE, max_size=40), min_size=1, max_size=4))
def test_any_log_reads_bounded_and_stores_within_its_bytes(chunks: list[list[str]]) -> None:
    record = TrainingRecord(declared_epochs=10)
    for lines in chunks:
        record = record.with_chunk("\n".join(lines) + "\n")
    _assert_bounded(record.log)
    note, summary = note_json(record), summary_json(record)
    assert len(note.encode()) <= MAX_NOTE_BYTES
    assert len(summary.encode()) <= MAX_SUMMARY_BYTES
    assert read_record(summary).log.latest.keys() <= record.log.latest.keys()
    back = read_record(note)
    _assert_bounded(back.log)
    assert back.log.latest == record.log.latest and back.log.best == record.log.best
    shown = back.progress
    assert shown.percent is None or 0 <= shown.percent <= 100
    assert shown.eta_seconds is None or 0 <= shown.eta_seconds < math.inf


def test_a_line_megabytes_long_is_skipped_and_the_next_one_read() -> None:
    huge = "Epoch[0] Validation-accuracy=0." + "9" * (5 * 1024 * 1024)
    log = read(TrainingLog(), huge + "\nEpoch[0] Validation-loss=0.5\n")
    assert log.latest == {"validation-loss": 0.5}
    assert recognise("Epoch[0] Time cost=1.0" + " " * MAX_LINE_CHARS) is None


def test_thousands_of_metric_names_in_one_line_keep_the_first_few() -> None:
    pairs = "\t".join(f"m{i}=0.5" for i in range(800))  # ~7,000 characters: within MAX_LINE_CHARS
    log = read(TrainingLog(), f"Epoch[0] Batch [0-4]\tSpeed: 1.0 samples/sec\t{pairs}\n")
    assert 0 < len(log.latest) <= MAX_METRICS


def test_markup_control_characters_and_non_finite_values_are_never_kept() -> None:
    text = "\n".join(
        [
            "Epoch[0] Validation-<b>acc</b>=0.9",
            "Epoch[0] Validation-[x](javascript:alert(1))=0.9",
            "Epoch[0] Validation-acc\u202e=0.9",  # a right-to-left override
            "Epoch[0] Validation-loss=nan",
            "Epoch[0] Validation-loss=inf",
            "Epoch[0] Validation-loss=1e999",
            "Epoch[0] Time cost=1e999",
            "Epoch[0] Time cost=-5.0",  # a time, never negative
            "Epoch[0] Batch [0-4]\tSpeed: -3.00 samples/sec",
            'MXGITOPS_PROGRESS {"epoch": 1, "metrics": {"<i>x</i>": 1, "ok": NaN, "y": 1e999}}',
            "Epoch[0] Validation-acc\x1b[31m\x00uracy=0.5",  # what a terminal shows: accuracy
        ]
    )
    log = read(TrainingLog(), text + "\n")
    assert log.latest == {"validation-accuracy": 0.5}
    assert (log.epoch_seconds, log.throughput) == ({}, None)


def test_a_forged_line_cannot_push_the_bounds() -> None:
    forged = "\n".join(
        [
            "Epoch[999999999999] Validation-accuracy=1.0",  # past MAX_EPOCH
            'MXGITOPS_PROGRESS {"epoch": 1, "epochs": 1000000000}',
            'MXGITOPS_PROGRESS {"epoch": 1, "steps": 0}',
            "Epoch[0] Batch [0-99999999999999]\tSpeed: 1.0 samples/sec",  # past MAX_BATCH
        ]
    )
    log = read(TrainingLog(), forged + "\n")
    assert log == TrainingLog()
