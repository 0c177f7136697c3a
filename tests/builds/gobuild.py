"""Build a Go program once per version into ~/.cache/mxgitops/<name>/<key>/.

The one way every server the tests run is built (the control plane, the training
operator, JobSet and Kueue, Gitea, the Pushgateway; the node's components share its
cache root): compiled from the Go module proxy through a wrapper module, under a
file lock (a second builder waits, then finds the result), into a staging directory
renamed into place only when complete, so an interrupted build leaves nothing that
looks finished.

Every step of a build runs through `run`, whose output goes to the part's log
(``~/.cache/mxgitops/logs/<part>.log``): a failed step is one `BuildFailed` line
naming the part, the command and the first line of its error, never a traceback of
a ``CalledProcessError``. A part that failed once in this process fails again at
once when asked again (the fixture that needs it), instead of building again.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def pinned_version(gomod_dir: Path, module: str) -> str:
    """The version of `module` the wrapper's go.mod requires."""
    text = (gomod_dir / "go.mod").read_text()
    found = re.search(rf"^(?:require)?\s+{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    if found is None:
        raise SystemExit(f"{gomod_dir / 'go.mod'} does not require {module}")
    return found.group(1)


# Read once, when the test session imports this module: tests that move HOME (to keep
# ~/.kube/config or ~/.gitconfig out) must still find the servers already built.
CACHE_HOME = Path.home() / ".cache" / "mxgitops"


LOG_DIR = CACHE_HOME / "logs"


class BuildFailed(pytest.fail.Exception):
    """A real part could not be built. A test whose fixture needs the part errors with
    this one line (pytest prints an OutcomeException's message, not its traceback)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, pytrace=False)


# Lines a failed build prints before its error: progress, not the cause.
_PROGRESS = re.compile(r"^(go: (downloading|finding|extracting) |#|\s*$)")


def first_error_line(output: str) -> str:
    for line in output.splitlines():
        if not _PROGRESS.match(line):
            return line.strip()[:200]
    return "(it printed nothing)"


def _shown(command: Sequence[str]) -> str:
    """The command as a person recognises it: the program, its verb and its target
    (a Go build's -ldflags alone run to hundreds of characters)."""
    words = [str(word) for word in command]
    if len(words) <= 3:
        return shlex.join(words)
    return f"{shlex.join(words[:2])} … {shlex.quote(words[-1])}"


def run(part: str, command: Sequence[str | Path], **kwargs: Any) -> str:
    """Run one step of `part`'s build and return its standard output; what it prints
    on standard error goes to the part's log as it comes. A failure raises
    `BuildFailed`."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = LOG_DIR / f"{part}.log"
    words = [str(word) for word in command]
    with open(log, "a") as out:
        out.write(f"\n$ {shlex.join(words)}\n")
        out.flush()
        start = out.tell()
        try:
            done = subprocess.run(words, stdout=subprocess.PIPE, stderr=out, text=True, **kwargs)
        except OSError as error:
            raise BuildFailed(f"{part}: `{_shown(words)}` could not start: {error}") from None
    if done.returncode != 0:
        with open(log) as written:
            written.seek(start)
            error = first_error_line(written.read() or done.stdout)
        raise BuildFailed(
            f"{part}: `{_shown(words)}` failed (exit {done.returncode}): {error} (the rest: {log})"
        )
    return done.stdout


_failed: dict[Path, BuildFailed] = {}


def remembered(target: Path, make: Callable[[], T]) -> T:
    """`make()`, unless it already failed for `target` in this process: then that
    failure again, without building again."""
    if target in _failed:
        raise _failed[target]
    try:
        return make()
    except BuildFailed as failure:
        _failed[target] = failure
        raise


def cache_root(name: str, env: str) -> Path:
    return Path(os.environ.get(env) or CACHE_HOME / name)


def build_key(version: str, *files: Path) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.read_bytes())
    return f"{version}-{digest.hexdigest()[:12]}"


def ensure_built(
    root: Path, key: str, expected: tuple[str, ...], compile_into: Callable[[Path], None]
) -> Path:
    """The directory `root/key` holding `expected`, compiling into it first if missing."""
    target = root / key
    if all((target / name).exists() for name in expected):
        _read_ahead(target, expected)
        return target
    return remembered(target, lambda: _build(root, target, expected, compile_into))


_read: set[Path] = set()
READ_CHUNK = 4 << 20


def _read_ahead(target: Path, expected: tuple[str, ...]) -> None:
    """Read a built part's files once a process, front to back, into the page cache.

    A server binary that is not in memory (a machine just booted, or one whose kernel
    reclaimed the page cache since the last run) is otherwise paged in by its own start,
    a few kilobytes at a time in no order: two control planes and a node starting at
    once on such a machine kept its disk busy for over a minute of small reads. Read in
    order, the same megabytes take a fraction of a second."""
    if target in _read:
        return
    _read.add(target)
    buffer = bytearray(READ_CHUNK)
    for path in (target / name for name in expected):
        if path.is_file():
            with path.open("rb", buffering=0) as file:
                while file.readinto(buffer):
                    pass


def _build(
    root: Path, target: Path, expected: tuple[str, ...], compile_into: Callable[[Path], None]
) -> Path:
    if shutil.which("go") is None:
        raise BuildFailed(f"{root.name}: building it needs Go (`go` is not on PATH)")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all((target / name).exists() for name in expected):
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".build-{target.name}-", dir=root))
        try:
            compile_into(staging)
            missing = [name for name in expected if not (staging / name).exists()]
            if missing:
                raise BuildFailed(f"{root.name}: the build made no {', '.join(missing)}")
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target
