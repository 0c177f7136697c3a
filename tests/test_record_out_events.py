"""The training record in the Events (`outputs/events.py`): the Event of a run first
seen finished says its epochs, metrics, duration and resource use; progress alone is
no Event (no Event storm); hostile names stay inside the note's 1,024 bytes, inert.
Written to the API (the double, or the real API server with --backend real), which
refuses an Event it cannot take."""

from __future__ import annotations

from datetime import UTC, datetime

from mxgitops.kube import cluster
from mxgitops.outputs import events
from mxgitops.outputs.events import MAX_NOTE, REPORTING_CONTROLLER
from tests.helpers.reconcile_e2e import NS, RETRY
from tests.helpers.records import (
    FINAL_VALIDATION_ACCURACY,
    finished_record,
    hostile_record,
    job,
    running_record,
    summary_with,
)
from tests.kubeapi.harness import KubeAPI

EVENTS = "events.events.k8s.io"
MOMENT = datetime(2026, 12, 7, 3, tzinfo=UTC)


def test_a_finished_runs_event_says_what_it_trained_and_used() -> None:
    summary = summary_with(job("resnet", "Succeeded", finished_record()))
    [event] = events.for_summary(summary, [(NS, "resnet")], now=MOMENT)
    assert event["reason"] == "Succeeded" and event["type"] == "Normal"
    assert event["note"] == (
        "succeeded (runtime r1); training: epoch 3/3 100%, 32538 samples/s; "
        f"validation-accuracy {FINAL_VALIDATION_ACCURACY}, validation-cross-entropy 1.098537, "
        "train-accuracy 0.359375; ran 1h 30m, 1.5 GPU-hours, 4.5 CPU-core-hours"
    )


def test_a_failed_runs_event_says_how_far_it_got_after_why_it_failed() -> None:
    failure = {"replica": "WORKER 0", "reason": "OOMKilled", "exit_code": 137}
    summary = summary_with(job("resnet", "Failed", running_record(5), failure=failure))
    [event] = events.for_summary(summary, [(NS, "resnet")], now=MOMENT)
    assert event["type"] == "Warning"
    head, training = event["note"].split("; training: ")
    assert "OOMKilled" in head
    assert training.startswith("epoch 2/5 20%, 32100 samples/s; validation-accuracy")


def test_progress_alone_writes_no_event() -> None:
    """A running job whose record moved on, unchanged otherwise: no Event, sync after
    sync (the note, the commit status and the metrics say its progress)."""
    for lines in (5, 9, 14):
        summary = summary_with(job("resnet", "Running", running_record(5, lines)))
        assert events.for_summary(summary, [], now=MOMENT) == []


def test_hostile_names_are_bounded_and_inert_and_the_api_takes_the_event(
    kubeapi: KubeAPI,
) -> None:
    failure = {"replica": "WORKER 0", "reason": "Error", "exit_code": 1}
    summary = summary_with(
        job("evil", "Failed", hostile_record(), failure=failure),
        job("resnet", "Succeeded", finished_record()),
    )
    told = events.for_summary(summary, [(NS, "evil"), (NS, "resnet")], now=MOMENT)
    evil = told[0]["note"]
    assert len(evil.encode()) <= MAX_NOTE and evil.isprintable(), evil
    assert "nan" not in evil.lower() and "n" * 100 not in evil
    connected = cluster.connect(kubeconfig=kubeapi.kubeconfig, retry=RETRY)
    assert events.write(connected, told, now=MOMENT) == 2
    written = {
        e["regarding"]["name"]: e["note"]
        for e in kubeapi.objects(EVENTS, NS)
        if e.get("reportingController") == REPORTING_CONTROLLER
    }
    assert written == {"evil": evil, "resnet": told[1]["note"]}
