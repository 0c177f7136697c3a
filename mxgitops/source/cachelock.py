"""One mxgitops process at a time in a Git cache: an exclusive file lock.

Syncs (and `status`) that share a cache directory would otherwise fetch,
check out and re-clone under each other's feet ("not a tree object",
"Directory not empty"). The lock is an `fcntl.flock` on the cache directory
(`--cache-dir`, which is never replaced, unlike a clone in it that is cloned
again; and no file is added to it), so the kernel releases it when its holder
dies, however it dies. A second process waits for it, up to a bound, then
stops with `CacheBusyError` (exit 5, like a held Lease).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from mxgitops.errors import CacheBusyError

DEFAULT_TIMEOUT = 300.0  # seconds a sync waits for another one's use of the cache
POLL_SECONDS = 0.1


@contextmanager
def held(
    path: Path,
    *,
    timeout: float | None = None,
    on_wait: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[None]:
    """Hold the lock of the directory `path` (created if missing) for the body of the
    `with`. `on_wait` is told once, when this process has to wait."""
    limit = DEFAULT_TIMEOUT if timeout is None else timeout
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline, told = clock() + limit, False
        while not _try_lock(fd):
            if clock() >= deadline:
                raise CacheBusyError(
                    f"the Git cache {path} is in use by another mxgitops process for longer "
                    f"than {limit:g} s (another sync shares this cache directory: give "
                    "each its own --cache-dir, or let it finish)"
                )
            if not told and on_wait is not None:
                on_wait(f"another mxgitops process to finish with the Git cache {path}")
                told = True
            sleep(POLL_SECONDS)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
