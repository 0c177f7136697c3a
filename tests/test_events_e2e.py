"""Kubernetes Events (events.k8s.io/v1) written by syncs, read back from the API server
(both backends: the real kube-apiserver validates them as it stores them)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.events import REPORTING_CONTROLLER
from tests.helpers.reconcile_e2e import (
    INSTANCE,
    NS,
    Syncer,
    batch_job,
    mxjob,
    repo,
    run,
    write,
)
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
