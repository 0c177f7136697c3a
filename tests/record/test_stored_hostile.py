"""A note whose training record claims what no run can (an epoch count past any bound,
a series of a million points): refused whole by `read_record`, in one line, never
parsed into a record that a view would then draw or count."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from mxgitops.record.lines import MAX_EPOCH
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.record.stored import RecordShapeError, note_json, read_record


def _note() -> dict[str, object]:
    record = TrainingRecord(declared_epochs=3).with_chunk(
        "Epoch[0] Train-accuracy=0.5\nEpoch[0] Validation-accuracy=0.4\n", at_end=False
    )
    data: dict[str, object] = json.loads(note_json(record.with_pods([], now=datetime.now(UTC))))
    return data


@pytest.mark.parametrize("key", ["epochs", "epochs_declared", "epochs_done", "epochs_said"])
def test_an_epoch_count_past_the_bound_is_refused(key: str) -> None:
    data = _note()
    progress = data["progress"]
    assert isinstance(progress, dict)
    progress[key] = MAX_EPOCH + 1
    with pytest.raises(RecordShapeError, match=f"progress.{key}") as refused:
        read_record(json.dumps(data))
    assert "\n" not in str(refused.value)


def test_a_series_of_a_million_points_is_refused_before_it_is_parsed() -> None:
    data = _note()
    data["series"] = {"train-accuracy": [[i, 0.5] for i in range(1, 1_000_001)]}
    text = json.dumps(data)
    with pytest.raises(RecordShapeError, match="bytes") as refused:
        read_record(text)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 200
