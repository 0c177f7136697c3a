"""The receiver over HTTP on loopback, its starter following an in-memory CronJob's Jobs:
every answer it gives, and the hostile cases (a forged signature, a replay, a flood of
1,000 signed pushes, a body over the limit, slow and too many clients). None starts
more than the coalesced number of syncs, or anything without a verified signature."""

from __future__ import annotations

import gc
import itertools
import json
import logging
import random
import socket
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from mxgitops.kube import cluster
from mxgitops.objects import KubeObject
from mxgitops.outputs.metrics import ReceiverCounters
from mxgitops.receiver.coalesce import Decision
from mxgitops.receiver.pushsync import WATCH_BACKOFF_CAP, Backoff, OnEvent, SyncStarter
from mxgitops.receiver.webhook import MAX_BODY, Forge, Push
from tests.controlplane.harness import wait_for
from tests.forges.webhooks import (
    CRONJOB,
    DEADLINE,
    NAMESPACE,
    FakeRuns,
    get,
    owned_job,
    post,
    push_body,
    running_receiver,
    signed,
)


@pytest.mark.parametrize("forge", ["github", "gitlab", "gitea"])
def test_a_signed_push_starts_the_cronjobs_job(forge: str) -> None:
    with running_receiver(branch="main") as (server, runs, _):
        body = push_body(commit="c" * 40)
        status, said = post(server, body, signed(forge, body, delivery="d-7"))
        assert (status, said) == (202, "starting a sync")
        (job,) = runs.wait_created(1)
        assert job["metadata"]["name"].startswith("mxgitops-push-")
        assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
        push = job["metadata"]["annotations"]["mxgitops.io/push"]
        assert push == f"{forge} delivery d-7, commit {'c' * 40}"


@pytest.mark.parametrize(
    ("headers", "body", "status", "said"),
    [
        (signed("github", b"{}", secret=b"forged"), push_body(), 401, "does not match"),
        ({"X-GitHub-Event": "push"}, push_body(), 401, "no signature"),
        (signed("gitlab", b"", secret=b"forged"), push_body(), 401, "X-Gitlab-Token"),
        (signed("github", push_body(branch="dev")), push_body(branch="dev"), 202, "refs/heads/dev"),
        (signed("github", b"{}", event="ping"), b"{}", 202, "'ping', not a push"),
        (signed("gitea", b"{oops"), b"{oops", 400, "not JSON"),
    ],
)
def test_nothing_else_starts_a_sync(
    headers: dict[str, str], body: bytes, status: int, said: str
) -> None:
    with running_receiver(branch="main") as (server, runs, _):
        answer = post(server, body, headers)
        assert answer[0] == status and said in answer[1], answer
        assert runs.created == []


def test_the_body_limit_is_answered_before_the_body_is_read() -> None:
    with running_receiver() as (server, runs, _):
        host, port = server.server_address[:2]
        with socket.create_connection((str(host), port), timeout=DEADLINE) as client:
            head = f"POST /webhook HTTP/1.1\r\nContent-Length: {MAX_BODY + 1}\r\n\r\n"
            client.sendall(head.encode())
            answer = client.recv(4096).decode()  # answered though no byte of the body came
        assert answer.startswith("HTTP/1.0 413"), answer
        exactly = push_body(padding="x" * (MAX_BODY - len(push_body(padding=""))))
        assert len(exactly) == MAX_BODY
        assert post(server, exactly, signed("github", exactly))[0] == 202
        assert runs.wait_created(1)


def test_a_replayed_delivery_starts_nothing_new() -> None:
    with running_receiver() as (server, runs, _):
        body = push_body()
        first = post(server, body, signed("github", body, delivery="d-1"))
        (job,) = runs.wait_created(1)
        runs.finish(job["metadata"]["name"])
        again = post(server, body, signed("github", body, delivery="d-1"))
        new_id = post(server, body, signed("github", body, delivery="d-2"))
        assert first[0] == again[0] == new_id[0] == 202
        assert again[1] == new_id[1] == "a replay of a push seen before: nothing starts"
        other = push_body(commit="e" * 40)
        assert post(server, other, signed("github", other, delivery="d-1"))[1].startswith(
            "a replay"
        )
        assert len(runs.created) == 1


def test_a_flood_of_signed_pushes_starts_two_syncs_in_bounded_memory() -> None:
    """1,000 distinct signed pushes, from 8 clients at once, while the first sync runs:
    one more sync waits, and starts when the first ends; memory stays bounded."""
    with running_receiver() as (server, runs, starter):
        bodies = [push_body(commit=f"{n + 1:040d}") for n in range(1_000)]  # zeros: deleted

        def deliver(n: int) -> tuple[int, str]:
            return post(server, bodies[n], signed("gitea", bodies[n], delivery=str(n)))

        first = post(server, bodies[0], signed("gitea", bodies[0], delivery="0"))
        assert first == (202, "starting a sync")
        (running,) = runs.wait_created(1)
        gc.collect()
        tracemalloc.start()
        began = time.monotonic()
        try:
            with ThreadPoolExecutor(8) as pool:
                answers = list(
                    pool.map(
                        lambda n: post(
                            server, bodies[n], signed("gitea", bodies[n], delivery=str(n))
                        ),
                        range(1, 1_000),
                    )
                )
            seconds = time.monotonic() - began
            gc.collect()
            _, peak = tracemalloc.get_traced_memory()
            held, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        said = {message for _, message in answers}
        assert {status for status, _ in answers} == {202}
        assert said == {
            "a sync runs: one more starts when it ends",
            "a sync already waits to start: it covers this push",
        }
        assert len(runs.created) == 1
        runs.finish(running["metadata"]["name"])
        runs.wait_created(2)
        assert starter.coalescer.waiting is None
        assert len(runs.created) == 2
        print(f"1,000 pushes: {seconds:.2f} s, peak {peak / 1e6:.1f} MB, held {held / 1e6:.2f} MB")
        assert held < 2e6  # what stays: 1,000 deliveries' ids and digests
        assert peak < 20e6  # 8 requests at a time, each under 1 KiB of body


def test_a_slow_client_is_cut_off_and_stalls_no_one() -> None:
    with running_receiver(read_timeout=1.0) as (server, runs, _):
        host, port = server.server_address[:2]
        with socket.create_connection((str(host), port), timeout=DEADLINE) as slow:
            slow.sendall(b"POST /webhook HTTP/1.1\r\nContent-Length: 500\r\n\r\n{")
            began = time.monotonic()
            body = push_body()
            assert post(server, body, signed("github", body))[0] == 202
            answered = time.monotonic() - began
            assert answered < 0.5, f"a slow client held the next one up for {answered:.2f} s"
            reply = slow.recv(4096)  # cut off by the receiver within its read timeout
            cut = time.monotonic() - began
        assert reply.startswith(b"HTTP/1.0 408"), reply
        assert 0.9 <= cut < 5, cut
        assert len(runs.wait_created(1)) == 1


def test_a_client_that_never_sends_its_headers_is_cut_off() -> None:
    with running_receiver(read_timeout=0.5) as (server, _, _):
        host, port = server.server_address[:2]
        with socket.create_connection((str(host), port), timeout=DEADLINE) as slow:
            slow.sendall(b"POST /webhook HTTP/1.1\r\n")
            began = time.monotonic()
            assert slow.recv(4096).startswith(b"HTTP/1.0 408")
            assert 0.4 <= time.monotonic() - began < 5


def test_connections_beyond_the_limit_are_answered_503_at_once() -> None:
    with running_receiver(max_connections=2, read_timeout=30) as (server, _, _):
        host, port = server.server_address[:2]
        idle = [socket.create_connection((str(host), port)) for _ in range(2)]
        try:
            wait_for("two connections taken", lambda: server._slots._value == 0, DEADLINE)  # type: ignore[attr-defined]
            status, said = get(server, "/healthz")
            assert (status, json.loads(said)["message"]) == (503, "too many connections")
        finally:
            for connection in idle:
                connection.close()
        wait_for("the slots freed", lambda: get(server, "/healthz")[0] == 200, DEADLINE)


def test_healthz_waits_for_the_first_list_and_metrics_count() -> None:
    runs = FakeRuns()
    with running_receiver(runs) as (server, _, _):
        assert get(server, "/healthz")[0] == 200
        body = push_body()
        post(server, body, signed("github", body))
        post(server, body, signed("github", body, secret=b"forged"))
        runs.wait_created(1)
        wait_for("the counter", lambda: b"syncs_started_total 1.0" in get(server, "/metrics")[1])
        metrics = get(server, "/metrics")[1].decode()
        assert "mxgitops_webhook_received_total 2.0" in metrics
        assert "mxgitops_webhook_verified_total 1.0" in metrics
        assert get(server, "/nope")[0] == 404
        assert post(server, body, signed("github", body), path="/")[0] == 404


def test_a_failed_create_is_tried_again() -> None:
    runs = FakeRuns()
    runs.fail_creates = 2
    with running_receiver(runs) as (server, _, _):
        body = push_body()
        assert post(server, body, signed("gitlab", body))[0] == 202
        assert len(runs.wait_created(1)) == 1


def test_no_push_starts_anything_before_the_first_list() -> None:
    """Until the CronJob's Jobs are listed, a sync may be running: a push waits."""

    class SlowList(FakeRuns):
        released = threading.Event()

        def list_jobs(self, namespace: str) -> tuple[list[KubeObject], str]:
            assert self.released.wait(DEADLINE)
            return super().list_jobs(namespace)

    runs = SlowList()
    starter = SyncStarter(runs, NAMESPACE, CRONJOB, ReceiverCounters(), watch_timeout=1)
    starter.start()
    try:
        assert starter.push(Push(Forge.GITHUB, "d", "0" * 64, "main", "")) is Decision.START
        with starter.changed:
            assert not starter._due() and not starter.ready()
        runs.released.set()
        assert len(runs.wait_created(1)) == 1
    finally:
        starter.stop()


def test_a_sigterm_while_a_connections_thread_starts_stops_the_receiver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGTERM's SystemExit raised in the main thread while it waits for a connection's
    thread to start (`Thread.start`): the thread runs, and frees its slot itself. Freeing
    it again raised ValueError instead, which the server took for that request's error:
    the SystemExit was lost and the receiver went on serving (seen in a full run)."""
    with running_receiver(max_connections=2) as (server, _, _):
        started, serving = threading.Thread.start, threading.current_thread()

        def start_then_sigterm(thread: threading.Thread) -> None:
            started(thread)
            if threading.current_thread() is serving:  # not the connection's own threads
                thread.join()  # the connection's thread done first: the order seen
                raise SystemExit(143)

        request, peer = socket.socketpair()
        peer.close()  # a client gone at once: its thread ends by itself
        with monkeypatch.context() as patch:
            patch.setattr(threading.Thread, "start", start_then_sigterm)
            with pytest.raises(SystemExit):
                server.process_request(request, ("127.0.0.1", 0))
        request.close()
        assert server._slots._value == 2  # type: ignore[attr-defined]


QUEUED = "a sync runs: one more starts when it ends"
SUSPENDED = "the CronJob is suspended: nothing starts; its schedule syncs again once it is resumed"


def test_an_ill_typed_job_in_a_watch_is_skipped_and_the_watch_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`status.conditions: 5` in a watch event killed the watcher: no sync ever started
    again, and /healthz said 200."""
    with running_receiver() as (server, runs, _):
        body = push_body()
        assert post(server, body, signed("github", body, delivery="d-1"))[1] == "starting a sync"
        (running,) = runs.wait_created(1)
        runs.inject("MODIFIED", owned_job("mxgitops-ill", conditions=5))
        runs.inject("MODIFIED", [1, 2])
        later = push_body(commit="b" * 40)
        assert post(server, later, signed("github", later, delivery="d-2"))[1] == QUEUED
        runs.finish(running["metadata"]["name"])
        assert len(runs.wait_created(2)) == 2
        assert get(server, "/healthz")[0] == 200
    assert "mxgitops-ill" in caplog.text and "status.conditions is a number" in caplog.text


def test_an_ill_typed_job_in_the_list_is_skipped() -> None:
    runs = FakeRuns()
    runs.jobs["mxgitops-ill"] = owned_job("mxgitops-ill", conditions=[{"type": 7}])
    with running_receiver(runs) as (server, _, _):
        body = push_body()
        assert post(server, body, signed("github", body))[1] == "starting a sync"
        assert len(runs.wait_created(1)) == 1


def test_a_dead_watcher_fails_healthz() -> None:
    """A watcher that stopped (a bug) keeps what runs unknown: not healthy."""

    class Broken(FakeRuns):
        breaks = threading.Event()

        def watch_jobs(self, namespace: str, since: str, on_event: OnEvent, *, timeout: int) -> str:
            assert self.breaks.wait(DEADLINE)
            raise RuntimeError("a bug")

    runs = Broken()
    with running_receiver(runs) as (server, _, _):
        assert get(server, "/healthz")[0] == 200
        assert get(server, "/livez")[0] == 200
        runs.breaks.set()
        wait_for("/healthz failing", lambda: get(server, "/healthz")[0] == 503, DEADLINE)
        said = json.loads(get(server, "/healthz")[1])["message"]
        assert said == "the watcher of the CronJob's Jobs stopped: restart the receiver"
        status, body = get(server, "/livez")  # the liveness probe: restarted
        assert (status, json.loads(body)["message"]) == (503, said)


def test_livez_does_not_wait_for_the_first_list() -> None:
    """A LIST the API server has not answered yet makes the receiver unready, not dead
    (`/livez`, the liveness probe, asks `stopped`): a restart would not answer it sooner."""

    class Unlisted(FakeRuns):
        listing = threading.Event()

        def list_jobs(self, namespace: str) -> tuple[list[KubeObject], str]:
            assert self.listing.wait(DEADLINE)
            return super().list_jobs(namespace)

    runs = Unlisted()
    starter = SyncStarter(runs, NAMESPACE, CRONJOB, ReceiverCounters(), watch_timeout=1)
    starter.start()
    try:
        assert (starter.unready(), starter.stopped()) == ("the Jobs are not listed yet", "")
        runs.listing.set()
        wait_for("ready", starter.ready, DEADLINE)
    finally:
        starter.stop()


@pytest.mark.parametrize("length", ["١٢".encode(), "²".encode("latin-1"), b"\xb9\xb2"])
def test_a_content_length_of_other_digits_is_a_bad_request(
    length: bytes, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """Headers are read as Latin-1: "²" passed `str.isdigit()` and failed `int()`, which
    killed the request's thread unanswered, with a traceback on stderr. (UTF-8 "١٢"
    arrives as other characters, and was refused already.)"""
    with (
        caplog.at_level(logging.INFO, "mxgitops.receiver.server"),
        running_receiver() as (server, runs, _),
    ):
        host, port = server.server_address[:2]
        with socket.create_connection((str(host), port), timeout=DEADLINE) as client:
            client.sendall(b"POST /webhook HTTP/1.1\r\nContent-Length: " + length + b"\r\n\r\n{}")
            answer = b"".join(iter(lambda: client.recv(4096), b""))  # to the end: HTTP/1.0
        assert answer.startswith(b"HTTP/1.0 400"), answer
        assert b"Content-Length is not a number" in answer
    (line,) = [r for r in caplog.records if r.getMessage().startswith("webhook:")]
    assert getattr(line, "status", None) == 400
    assert "Traceback" not in capfd.readouterr().err
    assert runs.created == []


def test_a_push_to_a_suspended_cronjob_starts_nothing_now_or_later() -> None:
    """Suspending the CronJob stops the reconciler (an incident): pushes are answered, and
    no sync starts for them, not even the one waiting when the running sync ends. Once
    resumed, a push starts one again."""
    with running_receiver() as (server, runs, starter):
        first = push_body(commit="1" * 40)
        assert post(server, first, signed("gitea", first, delivery="1"))[1] == "starting a sync"
        (running,) = runs.wait_created(1)
        waiting = push_body(commit="2" * 40)
        assert post(server, waiting, signed("gitea", waiting, delivery="2"))[1] == QUEUED
        runs.suspended = True
        during = push_body(commit="3" * 40)
        assert post(server, during, signed("gitea", during, delivery="3")) == (202, SUSPENDED)
        runs.finish(running["metadata"]["name"])

        def settled() -> bool:
            with starter.changed:
                return starter.coalescer.waiting is None and not starter.coalescer.running()

        wait_for("the waiting push dropped", settled, DEADLINE)
        assert len(runs.created) == 1
        runs.suspended = False
        after = push_body(commit="4" * 40)
        assert post(server, after, signed("gitea", after, delivery="4"))[1] == "starting a sync"
        assert len(runs.wait_created(2)) == 2


def test_watches_the_server_ends_at_once_are_backed_off(kubeapi: Any) -> None:
    """An API server that ends every watch at once, with a 200 (17,000 watches in 5 s
    were seen): each such watch counts as failed, and the next waits longer, with jitter,
    up to a cap; never more than two watches a second. Counted over a bounded number of
    the watcher's turns, on an injected clock: no time passes for the test."""
    turns, now, pauses = 24, [0.0], []
    kubeapi.faults("watch/jobs:ended=1")  # first: on the real backend, it adds the proxy
    connection = cluster.connect(kubeconfig=kubeapi.kubeconfig)

    def pause(seconds: float) -> bool:
        pauses.append(seconds)
        now[0] += seconds
        if len(pauses) == turns:
            starter.stopping.set()
        return starter.stopping.is_set()

    starter = SyncStarter(
        connection,
        "default",
        CRONJOB,
        ReceiverCounters(),
        clock=lambda: now[0],
        pause=pause,
        jitter=random.Random(7).random,
    )
    starter.watch()  # in this thread, until the last turn stops it
    watches = [e for e in kubeapi.request_log if e["verb"] == "watch"]
    lists = [e for e in kubeapi.request_log if e["verb"] == "list"]
    assert len(watches) == turns and len(lists) == 1  # a 200 keeps the version: no LIST
    assert all(b >= a or b >= WATCH_BACKOFF_CAP / 2 for a, b in itertools.pairwise(pauses))
    assert min(pauses) >= 0.5 and max(pauses) <= WATCH_BACKOFF_CAP
    assert pauses[-1] >= WATCH_BACKOFF_CAP / 2
    assert turns / now[0] < 0.1  # watches a second, over the whole run


def test_a_watch_that_lasted_clears_the_backoff() -> None:
    backoff = Backoff(first=1.0, cap=60.0, jitter=lambda: 0.0)
    assert [backoff.failed() for _ in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    backoff.succeeded()
    assert backoff.failed() == 1
    half = Backoff(first=1.0, cap=60.0, jitter=lambda: 1.0)
    assert [half.failed() for _ in range(3)] == [0.5, 1, 2]  # jitter takes up to half off
