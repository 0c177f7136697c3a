"""Notifications told by real syncs (the API double; the sink's book is a ConfigMap it
keeps there), to a loopback chat: once per transition, across syncs and a restarted
sync; a failed delivery tried again; a hanging chat bounded and never failing the sync;
a burst grouped."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from mxgitops.outputs.notify import transitions
from mxgitops.outputs.notify.outbox import name_of
from tests.helpers.chatserver import ChatServer, chat_server, notifications_file
from tests.helpers.cronjobruns import ended
from tests.helpers.sync import (
    INSTANCE,
    NS,
    Syncer,
    batch_job,
    batch_jobs,
    mxjob,
    repo,
    run,
    write,
)
from tests.kubeapi.harness import KubeAPI

__all__ = ["repo", "run"]  # fixtures from tests/helpers, used here

LOG = "epoch 3 loss=0.41\nTraceback (most recent call last):\nValueError: @channel bad <!here>"


@pytest.fixture(autouse=True)
def retried_at_the_next_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    """These syncs run seconds apart: a failed delivery's back-off (minutes) is not
    theirs to wait (tests/outputs/test_notify_retry_hostile.py has it)."""
    monkeypatch.setattr(transitions, "RETRY_AFTER", timedelta(0))


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with chat_server() as server:
        yield server


def fail(api: KubeAPI, name: str, exit_code: int = 3) -> None:
    api.run_job_controller(NS)
    job = batch_job(api, name, "worker")
    api.container_log(job=job, namespace=NS, text=LOG)
    api.kubelet(job=job, namespace=NS, phase="Failed", exit_code=exit_code, reason="Error")
    api.run_job_controller(NS)


def test_a_failing_job_is_told_once_across_syncs_and_a_restarted_sync(
    kubeapi: KubeAPI, repo: Path, run: Syncer, chat: ChatServer, tmp_path: Path
) -> None:
    settings = notifications_file(tmp_path, chat.url, "slack", "generic")
    write(repo, mxjob("train", servers=0, restart="Never"))
    run(notifications_file=settings)
    assert chat.requests == []  # created, pending for less than waitingAfter: nothing yet

    fail(kubeapi, "train")
    outcome = run(notifications_file=settings)
    assert outcome.undelivered == ()
    (slack,) = chat.received("/slack")
    assert f"{NS}/train failed" == slack.json["blocks"][0]["text"]["text"]
    assert "*Exit code:* 3" in slack.json["blocks"][1]["text"]["text"]
    log_block = slack.json["blocks"][2]["text"]["text"]
    assert "ValueError: @\u2060channel bad &lt;!here&gt;" in log_block
    (generic,) = chat.received("/generic")
    (told,) = generic.json["notifications"]
    assert (told["event"], told["exitCode"]) == ("failed", 3)
    assert told["log"].endswith("ValueError: @channel bad <!here>")

    run(notifications_file=settings)
    kubeapi.clear_log()
    run(notifications_file=settings)
    assert len(chat.requests) == 2  # nothing more, sync after sync
    book_writes = [
        e for e in kubeapi.request_log if e["resource"] == "configmaps" and e["method"] != "GET"
    ]
    assert book_writes == []  # nor any write of the book: nothing new

    restarted = Syncer(kubeapi, repo)  # a new pod: all it knows is in the cluster
    restarted(notifications_file=settings)
    assert len(chat.requests) == 2
    book = kubeapi.objects("configmaps", NS)
    assert name_of(INSTANCE) in [c["metadata"]["name"] for c in book]


def test_a_delivery_refused_is_tried_again_and_told_once(
    kubeapi: KubeAPI, repo: Path, run: Syncer, chat: ChatServer, tmp_path: Path
) -> None:
    settings = notifications_file(tmp_path, chat.url, "discord")
    write(repo, mxjob("train", servers=0, restart="Never"))
    run(notifications_file=settings)
    fail(kubeapi, "train")
    chat.statuses = [500]
    first = run(notifications_file=settings)
    assert first.ok  # what was applied stands
    (said,) = first.undelivered
    assert said == "notifications to discord-0 (discord): not delivered (HTTP 500)"
    assert chat.url not in said
    second = run(notifications_file=settings)
    assert second.undelivered == ()
    assert len(chat.requests) == 2
    assert chat.requests[0].body == chat.requests[1].body  # the same message, once told
    run(notifications_file=settings)
    assert len(chat.requests) == 2


def test_a_hanging_chat_is_bounded_and_never_fails_the_sync(
    kubeapi: KubeAPI, repo: Path, run: Syncer, chat: ChatServer, tmp_path: Path
) -> None:
    settings = notifications_file(tmp_path, chat.url, "slack", "mattermost")
    text = settings.read_text()
    settings.write_text(text + "timeout: 1s\n")
    write(repo, mxjob("train", servers=0, restart="Never"))
    run(notifications_file=settings)
    fail(kubeapi, "train")
    chat.hold = threading.Event()  # answers nothing until let go
    outcome = run(notifications_file=settings)
    assert outcome.ok and outcome.changeset is not None
    (said,) = outcome.undelivered
    assert said.startswith("notifications to slack-0 (slack): no answer within 1 s")
    assert "mattermost-1 (mattermost)" in said  # tried within what was left, or not tried
    chat.hold.set()
    chat.hold = None
    before = len(chat.requests)
    again = run(notifications_file=settings)
    assert again.undelivered == ()
    assert {r.path for r in chat.requests[before:]} == {"/slack", "/mattermost"}


def test_a_hundred_jobs_failing_at_once_are_one_message_per_destination(
    kubeapi: KubeAPI, repo: Path, run: Syncer, chat: ChatServer, tmp_path: Path
) -> None:
    """A node lost under a hundred local jobs: their pods fail together, the job
    controller (the real one, on the real backend) fails every Job, and the next sync
    tells each destination once, with the count and the first five jobs."""
    settings = notifications_file(tmp_path, chat.url, "slack", "msteams", "googlechat")
    names = [f"train-{n:03}" for n in range(100)]
    write(repo, *(mxjob(name, servers=0, restart="Never") for name in names))
    run(notifications_file=settings)
    kubeapi.run_job_controller(NS)
    workers = batch_jobs(kubeapi, "worker")
    assert sorted(workers) == names
    kubeapi.kubelet_jobs(list(workers.values()), namespace=NS, phase="Failed", exit_code=1)
    kubeapi.run_job_controller(NS)
    assert [ended(job) for job in kubeapi.objects("jobs", NS)] == ["Failed"] * 100
    outcome = run(notifications_file=settings)
    assert outcome.undelivered == ()
    assert sorted(r.path for r in chat.requests) == ["/googlechat", "/msteams", "/slack"]
    first = [f"{NS}/{name} failed" for name in names[:5]]
    slack = chat.received("/slack")[0].json
    assert slack["blocks"][0]["text"]["text"] == "100 jobs need a look: 100 failed"
    told = slack["blocks"][1]["text"]["text"].splitlines()
    assert [line.split(":")[0] for line in told] == [f"• {line}" for line in first] + [
        "and 95 more"
    ]
    teams = chat.received("/msteams")[0].json["attachments"][0]["content"]["body"]
    assert teams[0]["text"] == "100 jobs need a look: 100 failed"
    assert teams[1]["text"].splitlines()[-1] == "and 95 more"
    google = chat.received("/googlechat")[0].json["cardsV2"][0]["card"]
    assert google["header"]["title"] == "100 jobs need a look: 100 failed"
    google_lines = google["sections"][0]["widgets"][0]["textParagraph"]["text"].splitlines()
    assert len(google_lines) == 6 and google_lines[-1] == "and 95 more"
    run(notifications_file=settings)
    assert len(chat.requests) == 3


def test_a_job_that_succeeds_after_a_retry_is_told_once_that_it_succeeded(
    kubeapi: KubeAPI, repo: Path, run: Syncer, chat: ChatServer, tmp_path: Path
) -> None:
    """ExitCode: 137 is retried (Kubeflow's rule), so the job never failed: one message,
    that it succeeded."""
    settings = notifications_file(tmp_path, chat.url, "slack")
    write(repo, mxjob("train", servers=0, restart="ExitCode", runPolicy={"backoffLimit": 3}))
    run(notifications_file=settings)
    kubeapi.run_job_controller(NS)
    job = batch_job(kubeapi, "train", "worker")
    kubeapi.kubelet(job=job, namespace=NS, phase="Failed", exit_code=137, reason="OOMKilled")
    kubeapi.run_job_controller(NS)
    assert run(notifications_file=settings).summary.jobs[0].state != "Failed"
    assert chat.requests == []
    kubeapi.run_job_controller(NS)
    kubeapi.kubelet(job=job, namespace=NS, phase="Succeeded")
    kubeapi.run_job_controller(NS)
    run(notifications_file=settings)
    run(notifications_file=settings)
    (told,) = chat.requests
    assert told.json["blocks"][0]["text"]["text"] == f"{NS}/train succeeded"
