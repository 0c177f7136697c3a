"""No git call hangs a command: a remote that accepts the connection and never answers
ends `check` and `sync` with exit 3 and one line, at the deadline (`--request-timeout`).

The silent remote is a loopback TCP server that accepts every connection and never
sends a byte. git itself is real, killed with its process group at the deadline; the
lock files a killed git leaves in the cache do not break the next run.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mxgitops.cli import ExitCode, main
from tests.gitrepos.fixtures import GitRemote
from tests.kubeapi.harness import KubeAPI

TIMEOUT = 1.0
SECRET = "s3cret-token"


@pytest.fixture
def silent_remote() -> Iterator[str]:
    """An http:// URL (with a password) whose server accepts and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stopping = threading.Event()

    def accept() -> None:
        while not stopping.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted.append(connection)  # held open, never read, never answered

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    try:
        yield f"http://user:{SECRET}@127.0.0.1:{port}/jobs.git"
    finally:
        stopping.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        listener.close()
        for connection in accepted:
            connection.close()
        thread.join(timeout=5)


def invoke(*args: str) -> tuple[Result, float]:
    started = time.monotonic()
    result = CliRunner().invoke(main, list(args))
    return result, time.monotonic() - started


def one_line(result: Result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    return lines[0]


def test_sync_against_a_remote_that_never_answers_exits_3_at_the_deadline(
    kubeapi: KubeAPI, tmp_path: Path, silent_remote: str
) -> None:
    cache = tmp_path / "cache"
    result, elapsed = invoke(
        "sync",
        "--repo",
        silent_remote,
        "--cache-dir",
        str(cache),
        "--kubeconfig",
        str(kubeapi.kubeconfig),
        "--request-timeout",
        str(TIMEOUT),
    )
    assert result.exit_code == ExitCode.GIT, result.output
    assert elapsed < TIMEOUT + 3, elapsed
    line = one_line(result)
    assert "http://user:***@127.0.0.1:" in line and SECRET not in result.output, line
    assert "no answer within 1 s (--request-timeout)" in line, line
    assert kubeapi.request_log == []
    print(f"\nsilent remote: sync exited 3 after {elapsed:.2f} s (--request-timeout {TIMEOUT:g})")


def test_check_against_a_remote_that_never_answers_exits_3_at_the_deadline(
    kubeapi: KubeAPI, tmp_path: Path, silent_remote: str
) -> None:
    result, elapsed = invoke(
        "check",
        "--repo",
        silent_remote,
        "--cache-dir",
        str(tmp_path / "cache"),
        "--kubeconfig",
        str(kubeapi.kubeconfig),
        "--request-timeout",
        str(TIMEOUT),
    )
    assert result.exit_code == ExitCode.GIT, result.output
    assert elapsed < TIMEOUT + 3, elapsed
    said = [line for line in result.output.splitlines() if "no answer within 1 s" in line]
    assert len(said) == 1 and "127.0.0.1" in said[0], result.output
    assert SECRET not in result.output


def test_a_git_killed_at_its_deadline_leaves_no_process_behind(
    tmp_path: Path, silent_remote: str
) -> None:
    from mxgitops.errors import GitError
    from mxgitops.source import repository as source

    repository = source.Repository(silent_remote, cache_dir=tmp_path / "cache", timeout=TIMEOUT)
    port = silent_remote.rsplit(":", 1)[1].split("/")[0]
    with repository.locked(), pytest.raises(GitError, match="no answer within 1 s"):
        repository.sync()
    assert _git_processes(tmp_path, port) == []


def test_lock_files_a_killed_git_left_in_the_cache_do_not_break_the_next_sync(
    tmp_path: Path, make_git_remote: Any
) -> None:
    """What a git killed mid-fetch or mid-checkout leaves: its lock files. The next
    run holds the cache's lock, so none of them can be another git's: they go, and the
    cache is used as it is, not cloned again."""
    from mxgitops.source import repository as source

    remote: GitRemote = make_git_remote("jobs", files={"a.yaml": "kind: none\n"})
    repository = source.Repository(remote.url, cache_dir=tmp_path / "cache")
    with repository.locked():
        first = repository.sync()
    git_dir = first.root / ".git"
    left = [
        git_dir / "index.lock",
        git_dir / "HEAD.lock",
        git_dir / "packed-refs.lock",
        git_dir / "shallow.lock",
        git_dir / "refs" / "remotes" / "origin" / "main.lock",
    ]
    for path in left:
        path.write_text("")
    remote.commit({"b.yaml": "kind: none\n"})
    with repository.locked():
        second = repository.sync()
    assert (second.cloned, second.recloned_reason) == (False, None)
    assert (second.root / "b.yaml").is_file()
    assert not [path for path in left if path.exists()]


def _git_processes(tmp_path: Path, port: str) -> list[str]:
    """The git processes still running for this test: in its directory, or talking to
    its silent remote (git-remote-http names the URL)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = str((entry / "cwd").resolve())
        except OSError:
            continue
        if name.startswith("git") and (cwd.startswith(str(tmp_path)) or f":{port}/" in command):
            found.append(f"{entry.name}: {command}")
    return found
