"""Training records for the outputs' tests, built from MXNet's own logs
(tests/data/training-logs/) the way a sync folds them, and hostile ones built
directly (past what reading a log lets through)."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mxgitops.outputs.summary import JobSummary, Summary
from mxgitops.record.reading import TrainingLog
from mxgitops.record.resources import ResourceUse
from mxgitops.record.runrecord import TrainingRecord

LOGS = Path(__file__).resolve().parents[1] / "data" / "training-logs"
MODULE_FIT = "mxnet-1.9.1-module-fit.log"
COMMIT = "c0ffee" + "0" * 34
# What the Module.fit log printed last for its third epoch (Epoch[2]).
FINAL_VALIDATION_ACCURACY = 0.335938

# Names a log's author chooses: markup, a mention, a terminal escape, a new line.
HOSTILE_NAMES = (
    "**bold** [link](https://evil.example) <img src=x onerror=alert(1)>",
    "@org/platform-admins `code` | pipe",
    "\x1b[31mred\x1b]8;;https://evil.example\x07link\x1b[0m\nInjected: line\r",
    "n" * 10_000,
)


def log_lines(name: str = MODULE_FIT) -> list[str]:
    return (LOGS / name).read_text().splitlines()


def running_record(declared_epochs: int = 5, lines: int = 9) -> TrainingRecord:
    """The Module.fit log's first `lines` lines folded in: epoch 1 done, epoch 2 on."""
    chunk = "\n".join(log_lines()[:lines]) + "\n"
    return TrainingRecord(declared_epochs=declared_epochs).with_chunk(chunk)


def pod(cpu: str, gpus: int, started: str, finished: str | None) -> dict[str, Any]:
    state = {"terminated": {"finishedAt": finished}} if finished else {"running": {}}
    requests: dict[str, Any] = {"cpu": cpu}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    return {
        "spec": {"containers": [{"name": "mxnet", "resources": {"requests": requests}}]},
        "status": {"startTime": started, "containerStatuses": [{"name": "mxnet", "state": state}]},
    }


def finished_record() -> TrainingRecord:
    """The whole Module.fit log (3 epochs), and two pods that ran an hour and a half:
    one with 2 CPUs and a GPU, one with 1 CPU: 1.5 GPU-hours, 4.5 CPU-core-hours."""
    pods = [
        pod("2", 1, "2026-12-07T01:00:00Z", "2026-12-07T02:30:00Z"),
        pod("1", 0, "2026-12-07T01:00:00Z", "2026-12-07T02:30:00Z"),
    ]
    text = (LOGS / MODULE_FIT).read_text()
    return (
        TrainingRecord(declared_epochs=3)
        .with_chunk(text, at_end=True)
        .with_pods(pods, now=datetime(2026, 12, 7, 3, tzinfo=UTC))
    )


def hostile_record() -> TrainingRecord:
    """Every hostile name a metric, NaN and infinities among the values, and use figures
    that are not numbers: what no log can give (reading refuses them), built directly."""
    values = [0.5, math.nan, 0.25, math.inf]
    latest = dict(zip(HOSTILE_NAMES, values, strict=True))
    log = TrainingLog(
        epoch=3,
        finished=True,
        epochs=10,
        throughput=math.nan,
        latest=latest,
        best={name: math.nan for name in HOSTILE_NAMES},
    )
    use = ResourceUse(math.nan, math.inf, 1, True, "2026-12-07T01:00:00Z", "")
    return TrainingRecord(log=log, resources=use)


def summary_with(*jobs: JobSummary, commit: str = COMMIT) -> Summary:
    return Summary(commit=commit, instance="rec", jobs=jobs, synced_at="2026-12-07T03:00:00Z")


def job(name: str, state: str, record: TrainingRecord | None, **extra: Any) -> JobSummary:
    defaults: dict[str, Any] = {"spec_hash": "h", "runtime_id": "r1", "commit": COMMIT}
    return JobSummary(
        "ml", name, "unchanged", "unchanged", state=state, record=record, **(defaults | extra)
    )


def without_resources(record: TrainingRecord) -> TrainingRecord:
    return replace(record, resources=None)
