"""The receiver over HTTP on loopback, its starter following an in-memory CronJob's Jobs:
every answer it gives, and the hostile cases (a forged signature, a replay, a flood of
1,000 signed pushes, a body over the limit, slow and too many clients). None starts
more than the coalesced number of syncs, or anything without a verified signature."""

from __future__ import annotations

import gc
import json
import logging
import socket
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import pytest

from mxgitops.coalesce import Decision
from mxgitops.metrics import ReceiverCounters
from mxgitops.objects import KubeObject
from mxgitops.pushsync import SyncStarter
from mxgitops.receiver import MAX_BODY
from mxgitops.webhook import Forge, Push
from tests.controlplane.harness import wait_for
from tests.webhookfixtures import (
    CRONJOB,
    DEADLINE,
    NAMESPACE,
    FakeRuns,
    get,
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


@pytest.mark.parametrize("length", ["١٢".encode(), "²".encode("latin-1"), b"\xb9\xb2"])
def test_a_content_length_of_other_digits_is_a_bad_request(
    length: bytes, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """Headers are read as Latin-1: "²" passed `str.isdigit()` and failed `int()`, which
    killed the request's thread unanswered, with a traceback on stderr. (UTF-8 "١٢"
    arrives as other characters, and was refused already.)"""
    with (
        caplog.at_level(logging.INFO, "mxgitops.receiver"),
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
