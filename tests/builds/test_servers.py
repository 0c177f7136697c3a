"""The servers a test session runs are built once the tests are collected, before the
first test starts: a cold build takes minutes, far beyond a test's timeout (a JobSet
build started by its fixture was cut off at 120 s, and every JobSet test errored)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("test_file", "cache_env", "package"),
    [
        ("tests/e2e/test_jobset.py", "MXGITOPS_JOBSET_CACHE", "sigs.k8s.io/jobset"),
        ("tests/e2e/test_jobset.py", "MXGITOPS_KUEUE_CACHE", "sigs.k8s.io/kueue/cmd/kueue"),
    ],
)
def test_a_server_is_built_at_collection_not_by_its_fixture(
    tmp_path: Path, test_file: str, cache_env: str, package: str
) -> None:
    # A `go` that records what it was asked and fails: the build is attempted, and
    # the run stops there, with nothing built.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "go-calls"
    (bin_dir / "go").write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexit 1\n')
    (bin_dir / "go").chmod(0o755)
    env = {
        **os.environ,
        cache_env: str(tmp_path / "empty-cache"),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         test_file],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    builds = calls.read_text().splitlines() if calls.exists() else []
    assert any(line.startswith("build ") and line.endswith(package) for line in builds), (
        builds,
        done.stdout[-2000:],
        done.stderr[-2000:],
    )
    # The failed build is one line, and left to the tests that need the part.
    assert f"build failed: {package.split('/')[1]}: `go build" in done.stderr, done.stderr[-2000:]
    assert "INTERNALERROR" not in done.stdout + done.stderr
