"""Line recognition (mxgitops/record/lines.py) on MXNet 1.9.1's own output
(tests/data/training-logs/): every epoch's values equal to what the log printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from mxgitops.record.lines import Seen, recognise
from mxgitops.record.progressline import progress_line
from mxgitops.record.reading import TrainingLog, read

LOGS = Path(__file__).parents[1] / "data" / "training-logs"


def _read(name: str) -> TrainingLog:
    return read(TrainingLog(), (LOGS / name).read_text())


@pytest.mark.parametrize(
    "name", ["mxnet-1.9.1-module-fit.log", "mxnet-1.9.1-module-fit-noreset.log"]
)
def test_module_fit_every_epoch_as_printed(name: str) -> None:
    log = _read(name)
    assert log.series["validation-accuracy"] == {1: 0.335938, 2: 0.335938, 3: 0.335938}
    assert log.series["validation-cross-entropy"] == {1: 1.098537, 2: 1.098576, 3: 1.098537}
    assert log.series["train-accuracy"] == {1: 0.346354, 2: 0.359375, 3: 0.359375}
    assert log.latest["train-cross-entropy"] == 1.098211
    assert log.best["validation-cross-entropy"] == 1.098537  # a loss: the lowest
    assert (log.epoch, log.finished, log.epochs_done) == (3, True, 3)
    assert sorted(log.epoch_seconds) == [1, 2, 3]


def test_module_fit_time_cost_and_speed_as_printed() -> None:
    log = _read("mxnet-1.9.1-module-fit.log")
    assert log.epoch_seconds == {1: 0.154, 2: 0.016, 3: 0.013}
    assert log.throughput == 32537.63  # the last Speedometer line's


def test_speedometer_line_both_forms_and_the_older_one() -> None:
    tab = "\t"
    reset = f"Epoch[4] Batch [40-60]{tab}Speed: 1910.41 samples/sec{tab}accuracy=0.200000"
    assert recognise(reset) == Seen(
        epoch=5, batch=60, speed=1910.41, metrics=(("train-accuracy", 0.2),)
    )
    noreset = f"Epoch[0] Batch [0-8]{tab}Speed: 36383.23 samples/sec{tab}cross-entropy=1.098387"
    assert recognise(noreset) == Seen(
        epoch=1, batch=8, speed=36383.23, metrics=(("train-cross-entropy", 1.098387),)
    )
    older = "Epoch[0] Batch [10] Speed: 1910.41 samples/sec  Train-accuracy=0.200000"
    assert recognise(older.replace("  ", tab).replace(" Speed", tab + "Speed")) == Seen(
        epoch=1, batch=10, speed=1910.41, metrics=(("train-accuracy", 0.2),)
    )
    no_metric = f"Iter[2] Batch [50]{tab}Speed: 99.50 samples/sec"
    assert recognise(no_metric) == Seen(epoch=3, batch=50, speed=99.5)


def test_gluon_estimator_batch_and_epoch_lines() -> None:
    log = _read("mxnet-1.9.1-gluon-estimator-batch.log")
    assert log.epochs == 3  # `Train for 3 epochs.`
    assert log.series["validation-accuracy"] == {1: 0.4844, 2: 0.6328, 3: 0.7422}
    assert log.series["train-accuracy"] == {1: 0.4297, 2: 0.6042, 3: 0.7083}
    assert log.epoch_seconds == {1: 0.299, 2: 0.041, 3: 0.044}  # not the validation pass's
    # the last two batch lines: 128 samples in the 0.010 s the interval took
    assert log.throughput == pytest.approx(128 / 0.010)
    assert (log.epoch, log.finished) == (3, True)


def test_gluon_validation_pass_line_does_not_move_the_epoch_back() -> None:
    text = (LOGS / "mxnet-1.9.1-gluon-estimator-epoch.log").read_text()
    before_validation = text[: text.index("[Epoch 0] Finished in 0.005s")]
    up_to_it = text[: text.index("[Epoch 1] Finished")]
    assert read(TrainingLog(), up_to_it).epoch == read(TrainingLog(), before_validation).epoch
    assert read(TrainingLog(), up_to_it).epoch == 2
    assert recognise("[Epoch 1] Begin, current learning rate: 0.1000") == Seen(epoch=2)


@pytest.mark.parametrize(
    "prefix",
    [
        "",
        "INFO:root:",
        "2026-12-07 02:44:30,963 INFO ",
        "2026-12-07T02:44:30.963123456Z INFO:root:",  # kubectl logs --timestamps
        "\x1b[32mINFO\x1b[0m ",  # a coloured level
    ],
)
def test_logging_prefixes_before_a_line(prefix: str) -> None:
    seen = recognise(prefix + "Epoch[6] Validation-top_k_accuracy_5=0.912000")
    assert seen == Seen(
        epoch=7, finished=True, metrics=(("validation-top_k_accuracy_5", 0.912),), epoch_level=True
    )


def test_opt_in_line() -> None:
    line = progress_line(
        3, epochs=20, step=120, steps=500, metrics={"validation-accuracy": 0.912, "loss": 0.3}
    )
    assert line.startswith("MXGITOPS_PROGRESS {")
    seen = recognise("2026-12-07 02:44:30 INFO " + line)
    assert seen is not None
    assert (seen.epoch, seen.batch, seen.steps, seen.epochs, seen.finished) == (
        3,
        120,
        500,
        20,
        False,
    )
    assert seen.metrics == (("validation-accuracy", 0.912), ("loss", 0.3))
    assert not seen.epoch_level  # mid-epoch: the latest values, not the epoch's
    end = recognise(progress_line(3, epochs=20, metrics={"loss": 0.25}))
    assert end is not None and end.finished and end.epoch_level


@pytest.mark.parametrize(
    "text",
    [
        'MXGITOPS_PROGRESS {"epoch": 0}',  # counts from 1
        'MXGITOPS_PROGRESS {"epoch": true}',
        'MXGITOPS_PROGRESS {"epoch": 2, "epochs": "20"}',
        'MXGITOPS_PROGRESS {"epoch": 2, "metrics": [1, 2]}',
        'MXGITOPS_PROGRESS {"epochs": 20}',
        "MXGITOPS_PROGRESS [1]",
        'MXGITOPS_PROGRESS {"epoch": 2',
        "MXGITOPS_PROGRESS " + "[" * 3000 + "]" * 3000,
        'XMXGITOPS_PROGRESS {"epoch": 2}',
    ],
)
def test_opt_in_line_of_the_wrong_shape_is_ignored(text: str) -> None:
    assert recognise(text) is None


def test_lines_about_something_else_are_not_training() -> None:
    for line in [
        "[02:44:30] ../src/executor/graph_executor.cc:1991: Subgraph backend MKLDNN is activated.",
        "Validation Begin",
        "Training begin: using optimizer SGD with current learning rate 0.1000 ",
        "MyEpoch[3] Time cost=1.0",
        "Epoch[3] Time cost=1.0 and more",
    ]:
        assert recognise(line) is None, line
