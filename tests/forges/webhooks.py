"""What the receiver's tests share: requests signed as each forge signs them, a push
body, and an in-memory CronJob with its Jobs (`FakeRuns`) that lists and watches like
the API server, for the tests that are about the receiver, not the cluster (those run
on the real control plane: tests/receiver/test_process.py)."""

from __future__ import annotations

import copy
import hashlib
import hmac
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mxgitops.errors import ClusterServerError
from mxgitops.objects import KubeObject
from mxgitops.outputs.metrics import ReceiverCounters
from mxgitops.receiver.pushsync import OnEvent, SyncStarter
from mxgitops.receiver.server import Server, Settings
from tests.controlplane.harness import wait_for

SECRET = b"webhook-s3cret"
NAMESPACE, CRONJOB = "mxgitops", "mxgitops"
DEADLINE = 10.0  # seconds any awaited condition gets


def push_body(branch: str = "main", commit: str = "a" * 40, **extra: Any) -> bytes:
    payload = {
        "ref": f"refs/heads/{branch}",
        "before": "0" * 40,
        "after": commit,
        "repository": {"full_name": "org/jobs", "default_branch": "main"},
        **extra,
    }
    return json.dumps(payload).encode()


def signed(
    forge: str, body: bytes, *, delivery: str = "d-1", event: str = "", secret: bytes = SECRET
) -> dict[str, str]:
    """The headers `forge` sends with `body`, signed with `secret`."""
    digest = hmac.new(secret, body, hashlib.sha256).hexdigest()
    if forge == "github":
        return {
            "X-GitHub-Event": event or "push",
            "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": f"sha256={digest}",
        }
    if forge == "gitlab":
        return {
            "X-Gitlab-Event": event or "Push Hook",
            "X-Gitlab-Event-UUID": delivery,
            "X-Gitlab-Token": secret.decode(),
        }
    assert forge == "gitea", forge
    return {
        "X-Gitea-Event": event or "push",
        "X-Gitea-Delivery": delivery,
        "X-Gitea-Signature": digest,
    }


def rarely() -> str:
    """A schedule that fires once a year, about half a year from now: a CronJob whose
    controller starts no run while a test runs, and that is not suspended (the receiver
    starts nothing for a suspended CronJob)."""
    when = datetime.now(UTC) + timedelta(days=182)
    return f"{when.minute} {when.hour} {min(when.day, 28)} {when.month} *"


def cronjob() -> KubeObject:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": CRONJOB, "namespace": NAMESPACE, "uid": "uid-of-the-cronjob"},
        "spec": {
            "schedule": rarely(),
            "jobTemplate": {
                "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "kept"}},
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "mxgitops", "image": "mxgitops:1"}],
                        }
                    },
                },
            },
        },
    }


def owned_job(name: str, **status: Any) -> KubeObject:
    """One of the CronJob's runs, as the API server stores it, with `status` as given."""
    owner = {"apiVersion": "batch/v1", "kind": "CronJob", "name": CRONJOB, "controller": True}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "ownerReferences": [owner]},
        "status": status,
    }


class FakeRuns:
    """A namespace's CronJob and Jobs in memory; a watch is fed from its event log."""

    def __init__(self) -> None:
        self.jobs: dict[str, KubeObject] = {}
        self.created: list[KubeObject] = []
        self.events: list[tuple[str, KubeObject]] = []
        self.changed = threading.Condition()
        self.fail_creates = 0  # the next this-many creates fail with a 503
        self.suspended = False  # the CronJob's spec.suspend

    def cronjob(self, namespace: str, name: str, *, budget: float | None = None) -> KubeObject:
        assert (namespace, name) == (NAMESPACE, CRONJOB)
        found = cronjob()
        found["spec"]["suspend"] = self.suspended
        return found

    def create_job(self, job: KubeObject) -> bool:
        with self.changed:
            if self.fail_creates:
                self.fail_creates -= 1
                raise ClusterServerError("the API server failed", status=503)
            name = job["metadata"]["name"]
            if name in self.jobs:
                return False
            self.jobs[name] = copy.deepcopy(job)
            self.created.append(job)
            self._event("ADDED", name)
        return True

    def finish(self, name: str) -> None:
        with self.changed:
            self.jobs[name]["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
            self._event("MODIFIED", name)

    def _event(self, kind: str, name: str) -> None:
        self.inject(kind, self.jobs[name])

    def inject(self, kind: str, obj: Any) -> None:
        """A watch event of `obj` as it is, whatever its shape (a server gone wrong)."""
        with self.changed:
            self.events.append((kind, copy.deepcopy(obj)))
            self.changed.notify_all()

    def list_jobs(self, namespace: str) -> tuple[list[KubeObject], str]:
        with self.changed:
            return [copy.deepcopy(j) for j in self.jobs.values()], str(len(self.events))

    def watch_jobs(self, namespace: str, since: str, on_event: OnEvent, *, timeout: int) -> str:
        seen = int(since)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.changed:
                self.changed.wait(deadline - time.monotonic())
                news, seen = self.events[seen:], len(self.events)
            for kind, job in news:
                on_event(kind, job)
        return str(seen)

    def wait_created(self, count: int) -> list[KubeObject]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.created) >= count, DEADLINE), (
                f"{len(self.created)} Jobs created, not {count}"
            )
            return list(self.created)


@contextmanager
def running_receiver(
    runs: FakeRuns | None = None, **settings: Any
) -> Iterator[tuple[Server, FakeRuns, SyncStarter]]:
    """A receiver on loopback, its starter following `runs`, listed and ready."""
    runs = runs or FakeRuns()
    counters = ReceiverCounters()
    starter = SyncStarter(runs, NAMESPACE, CRONJOB, counters, retry_delay=0.01, watch_timeout=1)
    starter.start()
    wait_for("the starter's first LIST", starter.ready, DEADLINE)
    server = Server(("127.0.0.1", 0), starter, Settings(secret=SECRET, **settings), counters)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server, runs, starter
    finally:
        server.shutdown()
        server.server_close()
        starter.stop()


Address = Server | tuple[str, int]


def _connect(to: Address) -> http.client.HTTPConnection:
    host, port = (to.server_address if isinstance(to, Server) else to)[:2]
    return http.client.HTTPConnection(str(host), int(port), timeout=DEADLINE)


def post(
    to: Address, body: bytes, headers: dict[str, str], path: str = "/webhook"
) -> tuple[int, str]:
    """POST to the receiver (a server, or its address): the answer's status and message."""
    connection = _connect(to)
    try:
        connection.request("POST", path, body=body, headers=headers)
        answer = connection.getresponse()
        said = json.loads(answer.read() or b"{}")
        return answer.status, str(said.get("message", ""))
    finally:
        connection.close()


def get(to: Address, path: str) -> tuple[int, bytes]:
    connection = _connect(to)
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


class ReceiverProcess:
    """`mxgitops receive` run as a user runs it, on a free loopback port, its log (JSON
    lines) in a file."""

    def __init__(
        self, log: Path, *, cronjob: str, kubeconfig: Path, secret_file: Path, branch: str = "main"
    ) -> None:
        self.log = log
        command = [sys.executable, "-m", "mxgitops.cli", "receive", "--listen=127.0.0.1:0"]
        command += [f"--cronjob={cronjob}", f"--secret-file={secret_file}"]
        command += [f"--kubeconfig={kubeconfig}", f"--branch={branch}", "--log-format=json"]
        # faulthandler: a receiver that does not stop on SIGTERM is sent SIGABRT, and its
        # log then shows where each of its threads was.
        environment = {**os.environ, "PYTHONFAULTHANDLER": "1"}
        with log.open("wb") as output:
            self.process = subprocess.Popen(command, stderr=output, stdout=output, env=environment)
        self.address: tuple[str, int] | None = None

    def said(self) -> str:
        return self.log.read_text()

    def listening(self) -> bool:
        """Whether it serves (its address found in its log), or exited."""
        found = re.search(r"receiving webhooks at http://([\d.]+):(\d+)/", self.said())
        if found:
            self.address = (found[1], int(found[2]))
        return found is not None or self.process.poll() is not None

    def stop(self) -> None:
        """SIGTERM, as Kubernetes stops a pod: the receiver must be gone within 10 s."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            self.process.wait(timeout=10)
            raise AssertionError(
                "the receiver did not stop within 10 s of SIGTERM; its log, and its threads "
                f"when aborted:\n{self.said()[-6000:]}"
            ) from None
