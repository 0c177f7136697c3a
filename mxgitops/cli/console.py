"""What a person or a log collector sees while a sync runs: logs and progress.

Logs go to stderr, as text for people or one JSON object per line for the
CronJob's log pipeline (`--log-format json`). A progress display is shown
only when stderr is a terminal; redirected output never contains one. Only
`mxgitops sync` imports this module, and rich (no cheap import) only for a
terminal: the CronJob's sync never loads it.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from mxgitops.commands.sync import Progress as SyncProgress

if TYPE_CHECKING:
    from rich.progress import Progress

LOGGER = "mxgitops"
_STANDARD_ATTRIBUTES = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, message, and any `extra` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRIBUTES})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, sort_keys=True)


def configure_logging(log_format: str, verbosity: int) -> None:
    """Send mxgitops' logs to stderr: warnings by default, info with -v, errors with -q."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter("%(levelname)s: %(message)s")
    )
    logger = logging.getLogger(LOGGER)
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel({-1: logging.ERROR, 0: logging.WARNING}.get(verbosity, logging.INFO))


class TerminalProgress(SyncProgress):
    """A spinner per phase, and a bar for the writes of the apply phase."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._task: Any = None

    def phase(self, description: str, total: int | None = None) -> None:
        super().phase(description, total)
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._task = self._progress.add_task(description, total=total)

    def advance(self, count: int = 1) -> None:
        if self._task is not None:
            self._progress.advance(self._task, count)


class Tally(SyncProgress):
    """Passes the sync's progress on, counting the apply's writes for SIGTERM's line."""

    def __init__(self, display: SyncProgress) -> None:
        self.display = display
        self.total: int | None = None
        self.done = 0

    def phase(self, description: str, total: int | None = None) -> None:
        if description == "applying":
            self.total, self.done = total, 0
        self.display.phase(description, total)

    def advance(self, count: int = 1) -> None:
        self.done += count
        self.display.advance(count)

    def interrupted(self) -> str:
        if self.total is None:
            return "interrupted by SIGTERM before any write; the next sync does the work"
        return (
            f"interrupted by SIGTERM: lease released, {self.done} of {self.total} writes "
            "done; the next sync finishes the rest"
        )


@contextmanager
def progress_display(enabled: bool) -> Iterator[SyncProgress]:
    """A terminal progress display if `enabled` and stderr is a terminal, else silence."""
    if not enabled or not sys.stderr.isatty():
        yield SyncProgress()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        yield SyncProgress()
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        yield TerminalProgress(progress)


@contextmanager
def stopped_cleanly_on_sigterm() -> Iterator[None]:
    """Turn SIGTERM (a CronJob's deadline, a pod eviction) into SystemExit(143), so a
    sync unwinds: writes under way finish, the Lease is released, caches stay whole."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may handle signals (e.g. the CLI run from a test runner)
        return
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
