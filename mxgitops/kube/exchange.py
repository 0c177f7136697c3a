"""The seam between `kube/transport.py` and `kube/connections.py`: what a request's
`read` is given (`Response`) and the way a request goes out (`Way`).

Both sides import this module and not each other's types, so the transport names its
connections only where it builds them, lazily (urllib3 and httptools are no cost of
commands that need no cluster), and the connections never import the transport.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol


class Response(Protocol):
    """What a request's `read` is given: `connections.Answer` on a direct connection,
    urllib3's response through a proxy. Both read a body in pieces (`read(amount)`)."""

    status: int
    reason: str
    headers: Any

    def read(self, amount: int | None = None, /) -> bytes: ...


class Way(Protocol):
    """How requests reach the server (`connections.Direct`, `connections.ThroughProxy`):
    one exchange sends a request and hands over its answer, within `deadline`;
    `before_send` runs once the connection and credentials are ready, right before the
    request goes out (the Lease's fence is checked there)."""

    def exchange(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: dict[str, str],
        timeouts: tuple[float, float],
        deadline: float,
        before_send: Callable[[], None],
    ) -> AbstractContextManager[Response]: ...
