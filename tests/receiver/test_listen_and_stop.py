"""`mxgitops receive` as a new user first runs it (issue 47): a port already in use is
a usage error naming `--listen` (exit 2, not the bug code 70), `GET /webhook` says
the method is wrong (405, not "no such path"), and a stop on SIGTERM is logged."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from mxgitops.cli import main
from tests.controlplane.harness import wait_for
from tests.forges.webhooks import (
    CRONJOB,
    DEADLINE,
    NAMESPACE,
    FakeRuns,
    get,
    running_receiver,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def logging_restored() -> Iterator[None]:
    """`receive` points mxgitops' logger at CliRunner's stderr: put back afterwards."""
    logger = logging.getLogger("mxgitops")
    handlers, propagate, level = logger.handlers[:], logger.propagate, logger.level
    yield
    logger.handlers[:], logger.propagate = handlers, propagate
    logger.setLevel(level)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    path.write_text("s3cret\n")
    return path


def test_a_port_in_use_is_a_usage_error_naming_listen(
    monkeypatch: pytest.MonkeyPatch, secret: Path
) -> None:
    from mxgitops.kube import cluster

    monkeypatch.setattr(cluster, "connect", lambda **_: FakeRuns())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["receive", "--cronjob", f"{NAMESPACE}/{CRONJOB}", "--secret-file", str(secret)]
        result = CliRunner().invoke(main, [*args, "--listen", f"127.0.0.1:{port}"])
    assert result.exit_code == 2, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"Error: --listen 127.0.0.1:{port}: cannot listen there: "), last
    assert "in use" in last


def test_get_on_the_webhook_path_is_405() -> None:
    with running_receiver() as (server, _, _):
        status, body = get(server, "/webhook")
    assert status == 405
    assert json.loads(body)["message"] == "forges deliver to /webhook with POST, not GET"


# `mxgitops receive` in a process of its own, its cluster the in-memory CronJob's (the
# API double serves no CronJobs), stopped by SIGTERM as Kubernetes stops its pod.
_RECEIVE_ON_FAKE_RUNS = """
import sys
from mxgitops.cli import main
from mxgitops.kube import cluster
from tests.forges.webhooks import FakeRuns
cluster.connect = lambda **_: FakeRuns()
main(sys.argv[1:])
"""


def test_a_stop_on_sigterm_is_logged(secret: Path, tmp_path: Path) -> None:
    log = tmp_path / "receiver.log"
    command = [sys.executable, "-c", _RECEIVE_ON_FAKE_RUNS, "receive", "--listen=127.0.0.1:0"]
    command += [f"--cronjob={NAMESPACE}/{CRONJOB}", f"--secret-file={secret}"]
    command += ["--log-format=json"]
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=output, cwd=ROOT)
    try:
        wait_for(
            "the receiver to listen",
            lambda: "receiving webhooks at" in log.read_text() or process.poll() is not None,
            DEADLINE,
        )
    finally:
        process.terminate()
        code = process.wait(timeout=DEADLINE)
    said = log.read_text()
    lines = [json.loads(line) for line in said.splitlines() if line.startswith("{")]
    messages = [line["message"] for line in lines]
    assert code == 143, said
    started = next(m for m in messages if m.startswith("receiving webhooks at "))
    address = started.removeprefix("receiving webhooks at ")
    assert messages[-1] == f"stopped receiving webhooks at {address}: SIGTERM", messages
