"""`history` costs a constant number of git processes, whatever the length of the
history: one `git log`, the changed manifests and the notes each read in one batch.
Counted, not timed (bench/bench_history.py gives the time)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from mxgitops.commands.history import runs_at
from mxgitops.source.gitcommand import local_git
from tests.helpers.history import NOTES_REF, NS, built_history


def _git_processes(monkeypatch: pytest.MonkeyPatch, bare: Path) -> tuple[int, int]:
    """(runs found, git processes spawned) of reading mnist's history in `bare`."""
    spawned: list[list[str]] = []
    real = subprocess.Popen

    def counting(args: list[str], *rest: Any, **kwargs: Any) -> Any:
        spawned.append(list(args))
        return real(args, *rest, **kwargs)

    git = local_git(bare)
    monkeypatch.setattr(subprocess, "Popen", counting)
    try:
        runs = runs_at(git, "main", notes_ref=NOTES_REF, namespace=NS, name="mnist")
    finally:
        monkeypatch.setattr(subprocess, "Popen", real)
    assert all(record is not None for record in (run.record for run in runs))
    return len(runs), len(spawned)


def test_200_commits_spawn_as_many_git_processes_as_10(
    tmp_path: Path, git_isolation: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = built_history(tmp_path / "short", 10)
    long = built_history(tmp_path / "long", 200)

    short_runs, short_processes = _git_processes(monkeypatch, short)
    long_runs, long_processes = _git_processes(monkeypatch, long)

    assert (short_runs, long_runs) == (10, 200)
    assert short_processes == long_processes, (short_processes, long_processes)
    # git log; the manifests' sizes and blobs; the two notes refs, our notes' tree; the
    # notes' sizes and blobs.
    assert long_processes == 8, long_processes
