"""The record's note and ledger forms (mxgitops/record/stored.py): read back equal,
within their bytes, and anything else refused in one line."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mxgitops.errors import MxGitOpsError
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.record.stored import (
    MAX_NOTE_BYTES,
    MAX_SUMMARY_BYTES,
    RecordShapeError,
    note_json,
    read_record,
    summary_json,
)

LOGS = Path(__file__).parents[1] / "data" / "training-logs"
POD = {
    "spec": {"containers": [{"name": "mxnet", "resources": {"requests": {"cpu": "2"}}}]},
    "status": {
        "startTime": "2026-12-07T10:00:00Z",
        "containerStatuses": [{"state": {"terminated": {"finishedAt": "2026-12-07T10:30:00Z"}}}],
    },
}


def _record() -> TrainingRecord:
    record = TrainingRecord(declared_epochs=3, cluster="gpu-east")
    record = record.with_chunk((LOGS / "mxnet-1.9.1-module-fit.log").read_text())
    return record.with_pods([POD], now=datetime(2026, 12, 7, 11, tzinfo=UTC))


def test_the_note_reads_back_equal_and_carries_the_series() -> None:
    record = _record()
    text = note_json(record)
    assert read_record(text) == record
    data = json.loads(text)
    assert data["series"]["validation-accuracy"] == [[1, 0.335938], [2, 0.335938], [3, 0.335938]]
    assert data["progress"]["percent"] == 100.0
    assert data["duration_seconds"] == 1800.0
    assert data["resources"]["cpu_core_hours"] == 1.0


def test_a_record_read_back_takes_the_next_chunk_as_if_never_stored() -> None:
    lines = (LOGS / "mxnet-1.9.1-gluon-estimator-batch.log").read_text().splitlines(True)
    stored = read_record(note_json(TrainingRecord().with_chunk("".join(lines[:12]))))
    resumed = stored.with_chunk("".join(lines[10:]))
    assert resumed == TrainingRecord().with_chunk("".join(lines))


def test_the_summary_has_no_series_and_validation_metrics_first() -> None:
    record = _record()
    summary = json.loads(summary_json(record))
    assert "series" not in summary
    assert list(summary["final"]) == [
        "validation-accuracy",
        "validation-cross-entropy",
        "train-accuracy",
        "train-cross-entropy",
    ]
    back = read_record(summary_json(record))
    assert back.log.latest == record.log.latest and back.log.series == {}


def test_both_forms_stay_within_their_bytes_at_the_worst() -> None:
    big = 1.2345678901234567e300
    names = [f"validation-{'m' * 26}{i:02d}" for i in range(40)]
    text = "".join(
        f"Epoch[{e}] Validation-{n.removeprefix('validation-')}={big!r}\n"
        for e in range(0, 999_000, 7919)
        for n in names
    )
    record = TrainingRecord().with_chunk(text)
    note, summary = note_json(record), summary_json(record)
    assert len(note.encode()) <= MAX_NOTE_BYTES
    assert len(summary.encode()) <= MAX_SUMMARY_BYTES
    back = read_record(note)
    assert all(
        min(p) == min(s)
        for p, s in zip(back.log.series.values(), record.log.series.values(), strict=True)
    )
    assert read_record(summary).log.latest  # some metrics still in


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d.update(v=2), "v:"),
        (lambda d: d.update(extra=1), "unknown key"),
        (lambda d: d["final"].update({"<b>x</b>": 1.0}), "final:"),
        (lambda d: d["final"].update({"a": "1"}), "final.a:"),
        (lambda d: d["progress"].update(epoch=-1), "progress.epoch:"),
        (lambda d: d["progress"].update(epoch=True), "progress.epoch:"),
        (lambda d: d["series"].update({"a": [[1, 2, 3]]}), "series.a[0]:"),
        (lambda d: d["series"].update({"a": [[0, 1.0]]}), "series.a[0]:"),
        (lambda d: d["resources"].update(gpu_hours=-1), "resources.gpu_hours:"),
        (lambda d: d["resources"].pop("pods"), "resources: missing pods"),
        (lambda d: d.update(cluster="a b\n[x](y)"), "cluster:"),
        (lambda d: d.update(form="summary"), "holds no series"),
        (lambda d: d.pop("series"), "holds its series"),
        (lambda d: d.update(throughput=10**400), "throughput:"),
    ],
)
def test_an_ill_typed_record_is_refused_in_one_line(change, where) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(note_json(_record()))
    change(data)
    with pytest.raises(RecordShapeError) as refused:
        read_record(json.dumps(data))
    message = str(refused.value)
    assert where in message and "\n" not in message and len(message) < 200
    assert isinstance(refused.value, MxGitOpsError)


def test_a_cluster_name_that_is_not_plain_is_not_written() -> None:
    text = note_json(TrainingRecord(cluster="<b>east</b>\n| x |"))
    assert json.loads(text)["cluster"] == ""
    assert read_record(text).cluster == ""


@pytest.mark.parametrize(
    "text", ["", "[]", "null", '{"v": NaN}', "{" * 100_000, "x" * (MAX_NOTE_BYTES + 1)]
)
def test_what_is_not_a_record_is_refused(text: str) -> None:
    with pytest.raises(RecordShapeError):
        read_record(text)
