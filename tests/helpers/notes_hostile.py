"""Helpers of `tests/outputs/test_notes_hostile.py` that other test modules use too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

from mxgitops.cli import main
from tests.gitrepos.fixtures import GitRemote

REF = "refs/notes/mxgitops"


def status(remote: GitRemote, tmp_path: Path, *extra: str) -> Any:
    args = ["status", "--repo", remote.url, "--cache-dir", str(tmp_path / "status-cache")]
    return CliRunner().invoke(main, [*args, *extra])
