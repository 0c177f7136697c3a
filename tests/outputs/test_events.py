"""Kubernetes Events (events.k8s.io/v1) written by syncs, read back from the API server
(both backends: the real kube-apiserver validates them as it stores them)."""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.kube import cluster
from mxgitops.objects import JOB_NAME_LABEL
from mxgitops.outputs import events
from mxgitops.outputs.events import REPORTING_CONTROLLER, SERIES_INTERVAL
from tests.helpers.sync import (
    INSTANCE,
    NS,
    RETRY,
    WRITE_METHODS,
    Syncer,
    batch_job,
    mxjob,
    repo,
    run,
    summary_of,
    write,
)
from tests.kubeapi.clients import raw
from tests.kubeapi.harness import KubeAPI

__all__ = ["repo", "run"]  # fixtures from tests/helpers, used here

EVENTS = "events.events.k8s.io"


def ours(api: KubeAPI) -> list[dict[str, Any]]:
    """mxgitops' Events (on the real server, the controllers and the scheduler say more)."""
    return [
        e for e in api.objects(EVENTS, NS) if e.get("reportingController") == REPORTING_CONTROLLER
    ]


def said(api: KubeAPI) -> list[tuple[str, str, str]]:
    """(regarding job, reason, type) of mxgitops' Events, sorted."""
    return sorted((e["regarding"]["name"], e["reason"], e["type"]) for e in ours(api))


def event_posts(api: KubeAPI) -> list[dict[str, Any]]:
    return [e for e in api.request_log if e["resource"] == "events" and e["method"] == "POST"]


def event_writes(api: KubeAPI) -> list[tuple[str, str]]:
    """(method, the Event's name; "" for a POST) of each write of an Event since the log
    was cleared."""
    return [
        (e["method"], "" if e["method"] == "POST" else e["path"].rsplit("/", 1)[-1])
        for e in api.request_log
        if e["resource"] == "events" and e["method"] in WRITE_METHODS
    ]


def test_events_say_what_each_sync_did_once(kubeapi: KubeAPI, repo: Path, run: Syncer) -> None:
    # Never: the first failed pod fails the job, and its other replicas are stopped.
    write(repo, mxjob("train", servers=0), mxjob("oom", restart="Never"))
    outcome = run(events=True)
    assert outcome.undelivered == ()
    assert said(kubeapi) == [("oom", "Created", "Normal"), ("train", "Created", "Normal")]
    event = next(e for e in ours(kubeapi) if e["regarding"]["name"] == "train")
    assert event["reportingController"] == REPORTING_CONTROLLER
    assert event["reportingInstance"] == f"mxgitops-{INSTANCE}"
    assert event["action"] == "Create"
    assert event["related"]["kind"] == "Job"
    assert event["related"]["name"].startswith("train-worker-")

    # A sync that changes nothing writes no Event.
    kubeapi.clear_log()
    run(events=True)
    assert event_posts(kubeapi) == []

    # A job that fails: one Warning saying why, in the sync that first sees it.
    kubeapi.run_job_controller(NS)
    kubeapi.kubelet(
        job=batch_job(kubeapi, "oom", "worker"),
        namespace=NS,
        phase="Failed",
        exit_code=137,
        reason="OOMKilled",
    )
    kubeapi.run_job_controller(NS)
    run(events=True)
    failed = [e for e in ours(kubeapi) if e["reason"] == "Failed"]
    assert [(e["regarding"]["name"], e["type"]) for e in failed] == [("oom", "Warning")]
    assert "WORKER 0 exited 137 (OOMKilled" in failed[0]["note"]
    kubeapi.clear_log()
    run(events=True)
    assert event_posts(kubeapi) == []

    # A finished job's active batch Job was stopped; a spec change replaces.
    assert ("oom", "Stopped", "Normal") in said(kubeapi)
    write(repo, mxjob("train", servers=0, args=["train.py", "--lr", "0.1"]))
    run(events=True)
    assert ("train", "Replaced", "Normal") in said(kubeapi)


def test_a_held_job_is_told_once_per_reason(kubeapi: KubeAPI, repo: Path, run: Syncer) -> None:
    write(repo, mxjob("train", servers=0))
    run(events=True)
    (repo / "train.yaml").write_text(
        yaml.safe_dump({"kind": "MXJob", "metadata": {"name": "train"}})
    )
    run(events=True)
    held = [e for e in ours(kubeapi) if e["reason"] == "Held"]
    assert [(e["regarding"]["name"], e["type"]) for e in held] == [("train", "Warning")]
    assert "invalid" in held[0]["note"]
    run(events=True)  # the same hold again: the Event of that name is there already
    assert len([e for e in ours(kubeapi) if e["reason"] == "Held"]) == 1


def test_a_hold_that_lasts_is_said_once_then_as_a_series_at_a_bounded_rate(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    """A batch Job's label changed by hand holds its job, sync after sync: one Warning,
    then nothing written while syncs see the same hold; the Event is kept alive by a
    series update (count, lastObservedTime) at most once per SERIES_INTERVAL, which the
    API server accepts."""
    write(repo, mxjob("train"))
    run(events=True)
    kubeapi.run_job_controller(NS)
    edited = batch_job(kubeapi, "train", "worker", 1)
    status, _, body = raw(
        kubeapi,
        "PATCH",
        f"/apis/batch/v1/namespaces/{NS}/jobs/{edited}",
        {"metadata": {"labels": {JOB_NAME_LABEL: "other"}}},
        "application/merge-patch+json",
    )
    assert status == 200, body

    said_writes = []
    for _ in range(3):
        kubeapi.clear_log()
        outcome = run(events=True)
        assert outcome.undelivered == ()
        assert summary_of(outcome, "train").action == "hold"
        said_writes.append(event_writes(kubeapi))
    [held] = [e for e in ours(kubeapi) if e["reason"] == "Held"]
    assert said_writes == [[("POST", "")], [], []], said_writes
    assert held["type"] == "Warning" and edited in held["note"]

    # The same hold said by later syncs, their clock driven: a series update at most once
    # per interval, counted, on the Event said first.
    connected = cluster.connect(kubeconfig=kubeapi.kubeconfig, retry=RETRY)
    first = datetime.now(UTC)
    patched = []
    interval = SERIES_INTERVAL.total_seconds() / 60
    for minutes in (5, interval + 1, interval + 20, 2 * interval + 2):
        kubeapi.clear_log()
        moment = first + timedelta(minutes=minutes)
        told = events.for_summary(outcome.summary, (), now=moment)
        events.write(connected, told, now=moment)
        patched.append(event_writes(kubeapi))
    name = held["metadata"]["name"]
    assert patched == [[], [("PATCH", name)], [], [("PATCH", name)]], patched
    [kept] = [e for e in ours(kubeapi) if e["reason"] == "Held"]
    assert kept["series"]["count"] == 3
    assert kept["series"]["lastObservedTime"].startswith(
        (first + timedelta(minutes=2 * interval + 2)).strftime("%Y-%m-%dT%H:%M")
    )
    assert kept["eventTime"] == held["eventTime"] and kept["note"] == held["note"]


def test_kubectl_events_for_the_job_shows_them(control_plane: Any, repo: Path) -> None:
    """The real server only: `kubectl events` reads core/v1 Events with field selectors
    on involvedObject, which the real server serves from the same store as
    events.k8s.io/v1 (`regarding` is `involvedObject` there); the double keeps the two
    apart (tests/controlplane/DIFFERENCES.md)."""
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is not on PATH (the control plane's build puts it there)")
    control_plane.wipe()
    kubeapi = control_plane
    write(repo, mxjob("train", servers=0))
    Syncer(kubeapi, repo)(events=True)
    shown = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(kubeapi.kubeconfig),
            "events",
            "-n",
            NS,
            "--for",
            "job/train",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    [line] = [ln for ln in shown.stdout.splitlines() if "Created" in ln]
    assert "Job/train" in line or "job/train" in line, shown.stdout


def test_events_that_cannot_be_written_fail_nothing_else(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    """The API refuses every Event: the jobs are created, the summary is ok, the Events
    are one line of what was not delivered, retried no more than any write."""
    write(repo, mxjob("train", servers=0))
    kubeapi.faults("create/events:500=1")
    outcome = run(events=True)
    assert outcome.summary.ok
    assert [j.action for j in outcome.summary.jobs] == ["create"]
    assert kubeapi.objects("jobs", NS)
    [line] = outcome.undelivered
    assert line.startswith("1 of 1 Events not written: ")
    assert len(event_posts(kubeapi)) == run.retry.attempts


def test_a_write_the_api_refuses_is_a_warning_with_its_message(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    write(repo, mxjob("train", servers=0))
    kubeapi.faults("create/jobs:500=1")
    outcome = run(events=True)
    assert not outcome.summary.ok
    [event] = [e for e in ours(kubeapi) if e["reason"] == "WriteFailed"]
    assert (event["type"], event["action"], event["regarding"]["name"]) == (
        "Warning",
        "Create",
        "train",
    )
    assert event["note"].startswith("create failed: ") and "jobs" in event["note"]
