"""The training record in the Pushgateway metrics (`outputs/metrics.py`): progress
ratio, the latest value of a few metrics by name (a label value, sanitised), GPU-hours
and CPU-core-hours; pushed to a real Pushgateway (tests/pushgateway) and read back as
Prometheus parses it. A run gone from the summary leaves no value behind."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mxgitops.outputs import metrics
from mxgitops.outputs.summary import Summary
from tests.helpers.records import (
    FINAL_VALIDATION_ACCURACY,
    finished_record,
    hostile_record,
    job,
    running_record,
    summary_with,
)
from tests.pushgateway.server import Pushgateway

TRAINING = (
    "mxgitops_training_progress_ratio",
    "mxgitops_training_metric",
    "mxgitops_training_gpu_hours",
    "mxgitops_training_cpu_core_hours",
)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pushgateway]:
    with Pushgateway(tmp_path_factory.mktemp("pushgateway")) as server:
        yield server


def pushed(summary: Summary) -> dict[str, list[Any]]:
    """The samples of the training families the registry holds for `summary`, by name."""
    registry = metrics.training_registry(summary)
    found: dict[str, list[Any]] = {}
    for family in registry.collect():
        if family.name in TRAINING:
            found[family.name] = list(family.samples)
    return found


def by_labels(samples: list[Any], *keys: str) -> dict[tuple[str, ...], float]:
    return {tuple(s.labels[k] for k in keys): s.value for s in samples}


def test_progress_metrics_and_use_are_pushed_per_run() -> None:
    summary = summary_with(
        job("running", "Running", running_record(5)),
        job("done", "Succeeded", finished_record()),
        job("plain", "Running", None),
    )
    found = pushed(summary)
    ratio = by_labels(found["mxgitops_training_progress_ratio"], "namespace", "name")
    assert ratio == {("ml", "running"): 0.2, ("ml", "done"): 1.0}
    latest = by_labels(found["mxgitops_training_metric"], "name", "metric")
    assert latest[("done", "validation-accuracy")] == FINAL_VALIDATION_ACCURACY
    assert latest[("running", "train-accuracy")] == 0.375
    assert len([k for k in latest if k[0] == "done"]) == metrics.MAX_METRICS_PER_RUN
    assert by_labels(found["mxgitops_training_gpu_hours"], "name") == {("done",): 1.5}
    assert by_labels(found["mxgitops_training_cpu_core_hours"], "name") == {("done",): 4.5}


def test_hostile_names_are_label_values_only_bounded_and_plain_and_nan_is_not_pushed() -> None:
    found = pushed(summary_with(job("evil", "Failed", hostile_record())))
    names = {s.name for samples in found.values() for s in samples}
    assert names == {"mxgitops_training_progress_ratio", "mxgitops_training_metric"}
    labels = [s.labels["metric"] for s in found["mxgitops_training_metric"]]
    assert len(labels) == 2  # NaN and inf left out; the GPU and CPU hours too (not numbers)
    for label in labels:
        assert len(label) <= 40 and all(c.isalnum() or c in "_.-/@" for c in label), label
    values = [s.value for s in found["mxgitops_training_metric"]]
    assert sorted(values) == [0.25, 0.5]


def test_a_real_pushgateway_takes_them_and_a_run_gone_leaves_no_value(
    gateway: Pushgateway,
) -> None:
    gateway.wipe()
    summary = summary_with(
        job("done", "Succeeded", finished_record()), job("evil", "Failed", hostile_record())
    )
    metrics.push(gateway.url, metrics.SyncMetrics("rec", 1.0, 2.0, 0, summary))
    scraped = gateway.scrape()
    ratio = by_labels(scraped["mxgitops_training_progress_ratio"], "name")
    assert ratio == {("done",): 1.0, ("evil",): 0.3}
    latest = by_labels(scraped["mxgitops_training_metric"], "name", "metric")
    assert latest[("done", "validation-accuracy")] == FINAL_VALIDATION_ACCURACY
    assert len([k for k in latest if k[0] == "evil"]) == 2
    assert by_labels(scraped["mxgitops_training_gpu_hours"], "name") == {("done",): 1.5}

    assert {s.labels["group"] for s in scraped["mxgitops_training_metric"]} == {"training"}

    # A sync that stops before its summary leaves the training group as it was.
    metrics.push(gateway.url, metrics.SyncMetrics("rec", 3.0, 4.0, 1, None))
    assert gateway.scrape()["mxgitops_training_gpu_hours"] == scraped["mxgitops_training_gpu_hours"]

    # The next sync's summary has no run: every training series goes, the sync's stay.
    metrics.push(gateway.url, metrics.SyncMetrics("rec", 5.0, 6.0, 0, summary_with()))
    scraped = gateway.scrape()
    assert not set(TRAINING) & set(scraped), {n: scraped[n] for n in set(TRAINING) & set(scraped)}
    assert scraped["mxgitops_sync_success"][0].value == 1.0
    assert scraped["mxgitops_sync_end_timestamp_seconds"][0].value == 6.0
