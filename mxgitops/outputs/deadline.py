"""A whole call to an HTTP server bounded by a deadline, however the server answers.

urllib3's and urllib's timeouts bound connecting and each read of the socket, not the
call: a server that sends a byte every second (its status line, its headers, its body)
never lets a read time out, and the call lasts as long as it likes. The forge's
statuses and the Pushgateway's push are made in a thread of their own, which the
caller stops waiting for at the deadline: the call's error is an `OutputError`, and
the thread (a daemon, its socket's own timeout still set) is left to end with the
server's answer or the process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from mxgitops.errors import OutputError

T = TypeVar("T")


def within(seconds: float, call: Callable[[], T], what: str) -> T:
    """`call()`'s result or exception, or an OutputError naming `what` once `seconds`
    have passed without one."""
    done = threading.Event()
    outcome: list[tuple[T | None, BaseException | None]] = []

    def run() -> None:
        try:
            outcome.append((call(), None))
        except BaseException as exc:  # handed to the caller, raised there
            outcome.append((None, exc))
        finally:
            done.set()

    threading.Thread(target=run, name=f"mxgitops: {what}", daemon=True).start()
    if not done.wait(max(0.0, seconds)):
        raise OutputError(f"{what}: no answer within {seconds:g} s")
    result, error = outcome[0]
    if error is not None:
        raise error
    return result  # type: ignore[return-value]
