"""The training record on the real node: what MXNet printed is what mxgitops recorded.

One shared run (``tests/helpers/recordedrun.py``): a dist MXJob (scheduler, server,
2 workers) running MXNet 1.9.1's ``Module.fit`` with ``dist_sync`` and a Speedometer,
beside a ``local`` custom loop printing the opt-in line, a job that fails after two
epochs and a job Kueue keeps queued; then a second commit that changes the learning
rate. The real kubelet serves worker 0's log with its own
timestamps and honours ``sinceTime`` (the fake kubelet does neither: the sync's
reading is tested on the API double in ``test_record_sync.py``).

Each test parses the logs itself (the ``Validation-accuracy`` lines, the opt-in lines)
and the pods' times, and compares them with what the note, ``status -o json`` and
``history`` show.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import pytest

from mxgitops.outputs.report import read_note
from tests.helpers.recordedrun import (
    BROKEN,
    BROKEN_EPOCHS,
    BROKEN_EXIT,
    CPU,
    EPOCHS,
    FIT,
    FULL_QUEUE,
    HOSTILE_LINES,
    LOOP,
    WAITING,
    EndedRun,
    RecordedTraining,
    worker0,
)

pytestmark = pytest.mark.timeout(600)  # the shared run is made in the first test's setup

VALIDATION = re.compile(r"Epoch\[(\d+)\] Validation-accuracy=([0-9.]+)$", re.MULTILINE)
OPT_IN = re.compile(r"^MXGITOPS_PROGRESS (\{.*\})$", re.MULTILINE)


def validation_of(log: str) -> list[list[Any]]:
    """``[[epoch counted from 1, value], ...]`` as the log printed them."""
    return [[int(epoch) + 1, float(value)] for epoch, value in VALIDATION.findall(log)]


def job_of(status: dict[str, Any], name: str) -> dict[str, Any]:
    (job,) = [j for j in status["jobs"] if j["name"] == name]
    return dict(job)


def moment(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def pod_times(pods: list[dict[str, Any]]) -> list[tuple[datetime, datetime]]:
    """Each pod's start and its container's end, as the API server has them."""
    times = []
    for pod in pods:
        (container,) = pod["status"]["containerStatuses"]
        end = container["state"]["terminated"]["finishedAt"]
        times.append((moment(pod["status"]["startTime"]), moment(end)))
    return times


def assert_resources_match(record: dict[str, Any], run: EndedRun) -> None:
    times = pod_times(run.pods)
    cores = int(CPU.removesuffix("m")) / 1000
    hours = sum((end - start).total_seconds() for start, end in times) / 3600
    used = record["resources"]
    assert used["pods"] == len(run.pods) and used["estimate"] is False, used
    assert used["gpu_hours"] == 0, used
    assert abs(used["cpu_core_hours"] - cores * hours) <= 0.00005 + 1e-9, (used, cores * hours)
    start, end = min(s for s, _ in times), max(e for _, e in times)
    assert moment(used["started"]) == start and moment(used["finished"]) == end, used
    assert record["duration_seconds"] == (end - start).total_seconds(), record


def test_a_sync_while_module_fit_trains_shows_its_progress(
    recorded_training: RecordedTraining,
) -> None:
    run = recorded_training
    record = job_of(run.during, FIT)["record"]
    assert job_of(run.during, FIT)["state"] == "Running"
    progress = record["progress"]
    assert progress["epochs"] == EPOCHS  # declared by --num-epochs in its command
    assert 1 <= progress["epochs_done"] < EPOCHS and progress["percent"] < 100, progress
    seen = validation_of(run.worker0_during)
    # What the sync read is what the log printed, from its start: a prefix of the run's.
    assert record["series"]["validation-accuracy"][: len(seen)] == seen, record["series"]
    assert record["read_until"], record
    assert record["throughput"] and record["throughput"] > 0, record
    assert record["resources"]["estimate"] is True  # pods still ran


def test_the_note_and_status_record_every_epoch_worker_0_printed(
    recorded_training: RecordedTraining,
) -> None:
    run = recorded_training
    printed = validation_of(run.fit_first.worker0_log)
    assert [epoch for epoch, _ in printed] == list(range(1, EPOCHS + 1)), printed
    shown = job_of(run.after_first, FIT)
    assert shown["state"] == "Succeeded", shown
    record = shown["record"]
    assert record["series"]["validation-accuracy"] == printed
    assert record["final"]["validation-accuracy"] == printed[-1][1]
    assert record["best"]["validation-accuracy"] == max(value for _, value in printed)
    assert record["progress"]["percent"] == 100 and record["progress"]["epochs_done"] == EPOCHS
    assert_resources_match(record, run.fit_first)

    # The note of the commit that asked for the run holds the same record, read whole.
    note, _ = read_note(run.remote.note(run.first) or "")
    assert note is not None
    (job,) = [j for j in note.jobs if j.name == FIT]
    assert job.record is not None and job.runtime_id == run.fit_first.runtime_id
    assert [[e, v] for e, v in job.record.log.series["validation-accuracy"].items()] == printed
    assert job.record.progress.percent == 100.0

    # And after the second commit, its note still does (the record is the first run's).
    later, _ = read_note(run.remote.note(run.first) or "")
    assert later is not None
    (kept,) = [j for j in later.jobs if j.name == FIT]
    assert kept.record == job.record


def test_a_custom_loop_is_recorded_from_its_opt_in_line(
    recorded_training: RecordedTraining,
) -> None:
    run = recorded_training
    lines = [json.loads(line) for line in OPT_IN.findall(run.loop_first.worker0_log)]
    assert lines and lines[-1]["epoch"] == lines[-1]["epochs"], lines
    shown = job_of(run.after_first, LOOP)
    assert shown["state"] == "Succeeded", shown
    record = shown["record"]
    loss = [[line["epoch"], line["metrics"]["train-loss"]] for line in lines]
    assert record["series"].get("train-loss") == loss, (record, run.loop_first.worker0_log)
    assert record["best"]["train-loss"] == min(value for _, value in loss)
    assert record["progress"]["percent"] == 100, record["progress"]
    assert record["progress"]["epochs"] == lines[-1]["epochs"]
    assert_resources_match(record, run.loop_first)


def test_a_second_commit_gives_a_second_run_with_its_own_record(
    recorded_training: RecordedTraining,
) -> None:
    run = recorded_training
    assert run.fit_second.runtime_id != run.fit_first.runtime_id
    pod = worker0(run.fit_second.pods)
    assert pod is not None
    assert pod["spec"]["containers"][0]["command"][3] == "0.05"
    shown = job_of(run.after_second, FIT)
    assert shown["state"] == "Succeeded" and shown["runtime_id"] == run.fit_second.runtime_id
    printed = validation_of(run.fit_second.worker0_log)
    assert shown["record"]["series"]["validation-accuracy"] == printed
    assert_resources_match(shown["record"], run.fit_second)
    print(f"the shared run (two commits, four runs, a queued job) took {run.seconds:.1f} s")


def test_history_shows_both_runs_with_the_learning_rate_change_between(
    recorded_training: RecordedTraining,
) -> None:
    run = recorded_training
    print(run.history)
    newest, oldest = run.history_json["runs"]  # newest first
    assert (newest["commit"], oldest["commit"]) == (run.second, run.first)
    assert any("--lr 0.1 → 0.05" in line for line in newest["spec_change"]), newest
    assert oldest["spec_change"] == ["new job"], oldest
    for shown, ended_run in ((oldest, run.fit_first), (newest, run.fit_second)):
        printed = validation_of(ended_run.worker0_log)
        assert shown["outcome"] == "Succeeded", shown
        assert shown["final"]["validation-accuracy"] == printed[-1][1], shown
        assert shown["best"]["validation-accuracy"] == max(v for _, v in printed), shown
        record = {
            "resources": {
                "pods": len(ended_run.pods),
                "estimate": shown["resources_estimate"],
                "gpu_hours": shown["gpu_hours"],
                "cpu_core_hours": shown["cpu_core_hours"],
                "started": shown["started"],
                "finished": shown["finished"],
            },
            "duration_seconds": shown["duration_seconds"],
        }
        assert_resources_match(record, ended_run)
    table = run.history.splitlines()
    assert any(line.startswith(run.second[:7]) and "--lr 0.1 → 0.05" in line for line in table)
    assert any(line.startswith(run.first[:7]) and "Succeeded" in line for line in table)


def test_a_failed_job_keeps_its_log_tail_and_a_queued_one_kueues_reason(
    recorded_training: RecordedTraining,
) -> None:
    run = recorded_training
    note, _ = read_note(run.remote.note(run.first) or "")
    assert note is not None
    jobs = {j.name: j for j in note.jobs}

    broken = jobs[BROKEN]
    assert broken.state == "Failed" and broken.failure is not None, broken
    assert broken.failure["exit_code"] == BROKEN_EXIT, broken.failure
    printed = run.broken_log.rstrip("\n").splitlines()
    assert printed[-len(HOSTILE_LINES) :] == list(HOSTILE_LINES), run.broken_log
    # The tail kept is the log's own last lines, whole, as the kubelet served them.
    assert broken.failure["log"].splitlines() == printed, broken.failure
    assert broken.record is not None
    assert dict(broken.record.log.series["validation-accuracy"]) == dict(
        validation_of(run.broken_log)
    )
    assert broken.record.progress.epochs == BROKEN_EPOCHS
    assert broken.record.progress.epochs_done == 2

    waiting = jobs[WAITING]
    assert waiting.state == "Queued" and waiting.queue == FULL_QUEUE, waiting
    assert "insufficient" in run.waiting_said, run.waiting_said
    assert run.waiting_said in waiting.state_reason, (waiting.state_reason, run.waiting_said)
    assert job_of(run.after_second, WAITING)["state"] == "Queued"
    assert job_of(run.after_second, BROKEN)["state"] == "Failed"
