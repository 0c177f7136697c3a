"""An opt-in timeline of the session: where the suite's wall time goes.

``MXGITOPS_TEST_TIMELINE=FILE pytest ...`` appends one JSON line per test to FILE:
its worker (``gw0``..., ``main`` without xdist), its xdist group, its node id, its
start and end (wall clock, seconds since the epoch) and its setup, call and teardown
durations. Every worker appends to the same file: each line is one ``write`` of an
``O_APPEND`` file, so lines of different workers do not interleave. Unset, nothing is
recorded.

``python -m tests.session.timeline FILE`` reads it back: per worker, when it ended and
its groups in the order it ran them, each with its wall time and its slowest phases,
so the critical path (the worker that ends last, and what it spent its time on) can be
read off at a glance.

Registered by ``tests/conftest.py`` through ``pytest_plugins``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ENV = "MXGITOPS_TEST_TIMELINE"
PHASES = ("setup", "call", "teardown")
NESTED = "MXGITOPS_TEST_TIMELINE_NESTED"
_DURATIONS = pytest.StashKey[dict[str, float]]()
_TARGET = pytest.StashKey[Path]()


def worker_name() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def group_name(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return ""
    return str(marker.args[0] if marker.args else marker.kwargs.get("name", ""))


def append_line(path: Path, entry: dict[str, Any]) -> None:
    """One write per line: the workers' lines do not interleave."""
    data = (json.dumps(entry, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def pytest_configure(config: pytest.Config) -> None:
    """Only the suite's own sessions record: not a session some test runs inside it
    (pytester, in this process or a child), which finds the mark set below."""
    target = os.environ.get(ENV)
    if target and not os.environ.get(NESTED):
        config.stash[_TARGET] = Path(target)


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    # After xdist started its workers (at session start): they record, tests' sessions not.
    if _TARGET in session.config.stash:
        os.environ[NESTED] = "1"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[Any]:
    target = item.config.stash.get(_TARGET, None)
    if target is None:
        return (yield)
    durations: dict[str, float] = {}
    item.stash[_DURATIONS] = durations
    start = time.time()
    try:
        return (yield)
    finally:
        entry: dict[str, Any] = {
            "worker": worker_name(),
            "group": group_name(item),
            "test": item.nodeid,
            "start": round(start, 3),
            "end": round(time.time(), 3),
        }
        entry.update({phase: round(durations.get(phase, 0.0), 3) for phase in PHASES})
        append_line(target, entry)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[Any]:
    report = yield
    durations = item.stash.get(_DURATIONS, None)
    if durations is not None:
        durations[call.when] = call.duration
    return report


# ---- reading it back -------------------------------------------------------------


@dataclass
class GroupRun:
    """A worker's consecutive tests of one group (ungrouped tests: group "")."""

    group: str
    start: float
    end: float
    tests: list[dict[str, Any]] = field(default_factory=list)


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def runs_by_worker(entries: Iterable[dict[str, Any]]) -> dict[str, list[GroupRun]]:
    by_worker: dict[str, list[GroupRun]] = {}
    for entry in sorted(entries, key=lambda e: (e["worker"], e["start"])):
        runs = by_worker.setdefault(entry["worker"], [])
        if not runs or runs[-1].group != entry["group"]:
            runs.append(GroupRun(entry["group"], entry["start"], entry["end"]))
        runs[-1].end = entry["end"]
        runs[-1].tests.append(entry)
    return by_worker


def summary(entries: list[dict[str, Any]], slowest: int = 3) -> str:
    if not entries:
        return "no tests recorded"
    origin = min(e["start"] for e in entries)
    lines = []
    by_worker = runs_by_worker(entries)
    for worker, runs in sorted(by_worker.items(), key=lambda kv: kv[1][-1].end):
        busy = sum(e["end"] - e["start"] for run in runs for e in run.tests)
        lines.append(
            f"{worker}: ends at {runs[-1].end - origin:7.1f} s, "
            f"{sum(len(r.tests) for r in runs)} tests, busy {busy:.1f} s"
        )
        for run in runs:
            phases = sorted(
                ((e[p], p, e["test"]) for e in run.tests for p in PHASES),
                reverse=True,
            )[:slowest]
            lines.append(
                f"  {run.start - origin:7.1f} .. {run.end - origin:7.1f}"
                f" ({run.end - run.start:6.1f} s) {run.group or '-'}: {len(run.tests)} tests"
            )
            lines.extend(f"      {d:6.1f} s {p:8} {t}" for d, p, t in phases if d >= 5)
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(read(Path(sys.argv[1]))))
