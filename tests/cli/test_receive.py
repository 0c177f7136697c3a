"""`mxgitops receive`'s options: each bad one is a one-line error naming it (exit 2), and
a CronJob that is not there is found at the start (exit 4), not at the first push."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.receiver.server import Settings
from mxgitops.receiver.webhook import Forge, lowered, push_of
from tests.forges.webhooks import CRONJOB, NAMESPACE, FakeRuns, push_body, signed


@pytest.fixture(autouse=True)
def logging_restored() -> Iterator[None]:
    """`receive` points mxgitops' logger at CliRunner's stderr, at INFO: left so, a later
    test's receiver wrote every request's line into that buffer (the flood test in
    tests/receiver/test_server.py then held 3.7 MB, not 0.6, when run after this module)."""
    logger = logging.getLogger("mxgitops")
    handlers, propagate, level = logger.handlers[:], logger.propagate, logger.level
    yield
    logger.handlers[:], logger.propagate = handlers, propagate
    logger.setLevel(level)


def receive(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["receive", *args])
    return result.exit_code, result.output


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    path.write_text("s3cret\n")
    return path


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--cronjob", "no-namespace"], "--cronjob: 'no-namespace' is not NAMESPACE/NAME"),
        (["--cronjob", "a/b/c"], "--cronjob: 'a/b/c' is not NAMESPACE/NAME"),
        (["--cronjob", "a/b", "--listen", "8080"], "--listen: '8080' is not ADDR:PORT (such as "),
        (["--cronjob", "a/b", "--listen", "h:99999"], "--listen: 'h:99999' is not ADDR:PORT"),
        (
            ["--cronjob", "a/b", "--branch", "refs/tags/v1"],
            "--branch: 'refs/tags/v1' is not a branch",
        ),
    ],
)
def test_a_bad_option_is_one_line_naming_it(args: list[str], said: str, secret: Path) -> None:
    code, output = receive(*args, "--secret-file", str(secret))
    (line,) = output.strip().splitlines()
    assert code == 2 and line.startswith(f"Error: {said}"), output


def test_an_empty_secret_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    code, output = receive("--cronjob", "a/b", "--secret-file", str(empty))
    assert (code, output.strip()) == (
        2,
        f"Error: --secret-file: {empty} is empty; a webhook secret is needed",
    )


def test_a_missing_cronjob_stops_it_at_once(kubeapi: Any, secret: Path) -> None:
    code, output = receive(
        "--cronjob",
        "mxgitops/absent",
        "--secret-file",
        str(secret),
        "--kubeconfig",
        str(kubeapi.kubeconfig),
        "--listen",
        "127.0.0.1:0",
    )
    assert (code, output.strip()) == (4, "Error: the CronJob mxgitops/absent does not exist")


def test_a_branch_given_as_its_ref_is_tracked(
    monkeypatch: pytest.MonkeyPatch, secret: Path
) -> None:
    """`--branch refs/heads/main` (MXGITOPS_REF, which the sync's `--ref` takes so): the
    receiver ignored every push, as one "to refs/heads/main, not to
    refs/heads/refs/heads/main"."""
    from mxgitops.kube import cluster
    from mxgitops.receiver import server as receiver

    served: list[Settings] = []
    monkeypatch.setattr(cluster, "connect", lambda **_: FakeRuns())
    monkeypatch.setattr(receiver, "serve", lambda *args: served.append(args[2]))
    code, output = receive(
        "--cronjob",
        f"{NAMESPACE}/{CRONJOB}",
        "--secret-file",
        str(secret),
        "--branch",
        "refs/heads/main",
        "--listen",
        "127.0.0.1:0",
    )
    assert code == 0, output
    (settings,) = served
    body = push_body()
    sent = lowered(signed("github", body, secret=settings.secret).items())
    assert push_of(Forge.GITHUB, sent, body, settings.branch).branch == "main"
