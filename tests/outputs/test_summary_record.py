"""A job summary carries its run's training record through a note and back, and a
note whose record is not one of ours is refused like any other ill-typed field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mxgitops.outputs.notecheck import NoteError
from mxgitops.outputs.summary import JobSummary, Summary
from mxgitops.record.runrecord import TrainingRecord

LOGS = Path(__file__).parents[1] / "data" / "training-logs"


def _summary(record: TrainingRecord | None) -> Summary:
    job = JobSummary("ml", "mnist", "unchanged", "up to date", state="Running", record=record)
    return Summary(commit="c" * 40, jobs=(job,))


def test_a_record_survives_the_notes_round_trip() -> None:
    log = next(iter(sorted(LOGS.glob("*.log")))).read_text()
    record = TrainingRecord(declared_epochs=3).with_chunk(log, at_end=True)
    assert record.log.latest, "the fixture log shows metrics"
    data = json.loads(json.dumps(_summary(record).to_dict()))
    back = Summary.from_dict(data).jobs[0].record
    assert back is not None
    assert back.log.latest == record.log.latest
    assert back.log.series == record.log.series
    assert back.progress == record.progress


def _as_written(summary: Summary) -> dict[str, object]:
    data: dict[str, object] = json.loads(json.dumps(summary.to_dict()))
    return data


def test_a_job_without_a_record_writes_null_and_reads_none() -> None:
    data: dict[str, Any] = _as_written(_summary(None))
    assert data["jobs"][0]["record"] is None
    assert Summary.from_dict(data).jobs[0].record is None


@pytest.mark.parametrize("forged", [[], "x", {"v": 99}, {"v": 1, "form": "note"}])
def test_a_forged_record_refuses_the_note_naming_the_field(forged: object) -> None:
    data: dict[str, Any] = _as_written(_summary(None))
    data["jobs"][0]["record"] = forged
    with pytest.raises(NoteError, match=r"jobs\[0\]\.record"):
        Summary.from_dict(data)
