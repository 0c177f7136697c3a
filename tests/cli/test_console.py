"""console.py: JSON logs for the CronJob, and a progress display only on a terminal."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
from collections.abc import Iterator

import pytest
from rich.console import Console
from rich.progress import Progress

from mxgitops.cli import console
from mxgitops.commands.sync import Progress as SilentProgress


@pytest.fixture(autouse=True)
def restore_logger() -> Iterator[None]:
    """configure_logging changes a process-wide logger; leave it as it was."""
    logger = logging.getLogger("mxgitops")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


def test_json_logs_are_one_object_per_line_with_extra_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    console.configure_logging("json", 1)
    logging.getLogger("mxgitops").info("sync finished", extra={"commit": "abc", "ok": True})
    logging.getLogger("mxgitops").debug("not shown at -v")
    (line,) = capsys.readouterr().err.splitlines()
    entry = json.loads(line)
    assert (entry["level"], entry["message"], entry["commit"], entry["ok"]) == (
        "info",
        "sync finished",
        "abc",
        True,
    )
    assert entry["time"].endswith("+00:00")


@pytest.mark.parametrize(("verbosity", "level"), [(-1, "ERROR"), (0, "WARNING"), (1, "INFO")])
def test_verbosity_sets_the_level(verbosity: int, level: str) -> None:
    console.configure_logging("text", verbosity)
    assert logging.getLevelName(logging.getLogger("mxgitops").level) == level


def test_no_progress_display_when_stderr_is_not_a_terminal() -> None:
    with console.progress_display(True) as progress:  # pytest captures stderr: no tty
        assert type(progress) is SilentProgress
    with console.progress_display(False) as progress:
        assert type(progress) is SilentProgress


def test_terminal_progress_shows_the_phase_and_counts_writes() -> None:
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=80)
    with Progress(console=terminal, auto_refresh=False) as bar:
        progress = console.TerminalProgress(bar)
        progress.phase("reading the cluster")
        progress.phase("applying", total=3)
        progress.advance()
        progress.advance()
        (task,) = bar.tasks  # the previous phase's line is gone
        assert (task.description, task.completed, task.total) == ("applying", 2, 3)
        bar.refresh()
    assert "applying" in screen.getvalue()


def test_sigterm_unwinds_as_system_exit_and_the_old_handler_comes_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    unwound = []
    with pytest.raises(SystemExit) as caught, console.stopped_cleanly_on_sigterm():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        finally:
            unwound.append("finally ran")  # where a sync releases its Lease
    assert caught.value.code == 128 + signal.SIGTERM
    assert unwound == ["finally ran"]
    assert signal.getsignal(signal.SIGTERM) == before
