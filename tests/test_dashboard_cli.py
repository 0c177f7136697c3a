"""`mxgitops dashboard` as a person runs it: a process serving a real repository's notes
on loopback until SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.gitrepos.fixtures import GitRemote
from tests.helpers.dashboard import three_jobs


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_command_serves_the_branch_until_sigterm(
    make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files={"README.md": "jobs\n"})
    commits = three_jobs(remote)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "mxgitops.cli", "dashboard", "--listen", f"127.0.0.1:{port}",
         "--repo", remote.url, "--branch", "main", "--base-path", "/mxgitops",
         "--commit-url", "https://forge.test/jobs/commit/{sha}"],
        env={**os.environ, "MXGITOPS_CACHE_DIR": str(tmp_path / "cache")},
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/mxgitops"
    try:
        deadline = time.monotonic() + 60
        while True:  # until it has read the branch: a condition, with a deadline
            assert server.poll() is None, server.communicate()[1]
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the dashboard did not read the branch in 60 s"
            time.sleep(0.05)
        with urllib.request.urlopen(f"{base}/", timeout=30) as answer:
            body = answer.read().decode()
        assert body.count('<tr class="job"') == 3
        assert f'href="https://forge.test/jobs/commit/{commits.first}"' not in body
        with urllib.request.urlopen(f"{base}/jobs/default/broken", timeout=30) as answer:
            page = answer.read().decode()
        assert f'href="https://forge.test/jobs/commit/{commits.first}"' in page
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=60)
    assert server.returncode == 143, stderr
