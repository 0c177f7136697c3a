"""The record's words are said once (`outputs/recordtext.py`): `status`'s PROGRESS
column, the note, `history`, the pull request's earlier-runs line and the dashboard
name the same key metric and write a duration the same way."""

from __future__ import annotations

from mxgitops.commands.history import Run
from mxgitops.commands.historyview import render_table, shown
from mxgitops.commands.review import LastRun
from mxgitops.dashboard.snapshot import JobRow
from mxgitops.outputs import recordtext, report
from mxgitops.record.reading import TrainingLog
from mxgitops.record.runrecord import TrainingRecord
from tests.helpers.records import COMMIT, finished_record, job, summary_with


def a_record_with(latest: dict[str, float]) -> TrainingRecord:
    log = TrainingLog(epoch=2, finished=True, epochs=4, latest=latest, best=latest)
    return TrainingRecord(log=log)


def a_run(record: TrainingRecord) -> Run:
    date = "2026-12-07T03:00:00+00:00"
    return Run(COMMIT, "a", date, spec_change=(), state="Succeeded", record=record)


def test_every_view_names_the_same_key_metric() -> None:
    # The dashboard ranked `eval-`/`test-` names and accuracies before losses; the
    # others, validation metrics first, then by name: all now take the latter.
    record = a_record_with({"validation-loss": 0.25, "validation-top_k": 0.75, "eval-acc": 0.5})
    assert recordtext.key_metric(record) == "validation-loss"
    assert "val-loss 0.25" in recordtext.row_text(record)
    row = JobRow(job("resnet", "Succeeded", record), record, None)
    assert row.key_metric() == ("validation-loss", 0.25)
    seen = shown("ml/resnet", [a_run(record)], None)
    assert seen.metric == "validation-loss"


def test_a_duration_reads_the_same_in_the_note_history_and_the_plan_comment() -> None:
    record = finished_record()  # its pods ran an hour and a half
    note = report.render_note(summary_with(job("resnet", "Succeeded", record)))
    assert "ran 1h30m," in note
    assert "1h30m" in render_table(shown("ml/resnet", [a_run(record)], None))
    last = LastRun(job="ml/resnet", commit=COMMIT, duration_seconds=5400.0)
    assert last.describe().endswith("ran in 1h30m")


def test_durations_percentages_and_etas() -> None:
    assert [recordtext.duration(s) for s in (44.6, 840, 7500, 3 * 86400 + 4 * 3600)] == [
        "45s",
        "14m",
        "2h05m",
        "3d04h",
    ]
    assert recordtext.duration(float("nan")) == "0s"
    assert recordtext.percent(35.0) == "35%"
    assert recordtext.eta(840) == "ETA 14m"
    assert recordtext.shown_value(0.912345) == "0.9123"
