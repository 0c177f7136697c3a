"""The connections of `kubehttp.Transport` to one API server, and one request's
exchange over them: the request sent, the answer handed over, the connection kept
for the next request only when the answer was read to its end.

Imported when a `Transport` is built: http.client (and the email package it
parses headers with) is no cost of commands that need no cluster.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import urllib3
from urllib3.util.wait import wait_for_read

if TYPE_CHECKING:
    from mxgitops.kubehttp import Response

# What an exchange raises when no answer came: http.client's errors on a direct
# connection, urllib3's through a proxy, the socket's on either.
UNANSWERED = (http.client.HTTPException, urllib3.exceptions.HTTPError, OSError)


class Direct:
    """Requests straight to the server, each over a connection of its own while it
    lasts, kept for the next request when its answer was read to the end. urllib3
    makes each connection (socket options, TLS, certificates, the server's name); the
    standard library's http.client speaks HTTP/1.1 over it. Through urllib3's pool a
    request cost a writer twice the CPU, under the GIL all writers share: on a 2-core
    machine, that was what bounded a first sync."""

    def __init__(self, pool: Any, prefix: str, *, keep: int) -> None:
        self.pool, self.prefix, self.keep = pool, prefix, keep
        self._idle: list[Connection] = []
        self._lock = threading.Lock()

    @contextmanager
    def exchange(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: dict[str, str],
        timeouts: tuple[float, float],
    ) -> Iterator[Response]:
        with self._lock:
            connection = self._idle.pop() if self._idle else Connection(self.pool)
        response = None
        try:
            connection.prepare(*timeouts)
            connection.request(method, self.prefix + url, body, headers)
            response = connection.getresponse()
            yield response
        finally:
            # Kept only after an answer read to its end (a refusal's too): the next
            # request must not find the rest of this one's body on the connection.
            if response is not None and response.isclosed():
                self._keep(connection)
            else:
                connection.close()

    def _keep(self, connection: Connection) -> None:
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append(connection)
                return
        connection.close()


class Connection(http.client.HTTPConnection):
    """http.client over a socket urllib3 connected. A request's head and body go in
    one write (http.client sends them in two: two system calls, the server woken
    twice). A connection idle for a while is checked before it is used again: one
    the server closed meanwhile (its idle timeout) would fail the request."""

    IDLE_CHECK = 1.0  # seconds

    def __init__(self, pool: Any) -> None:
        super().__init__(pool.host, pool.port)
        self.pool = pool
        self.read_timeout: float | None = None
        self.used = 0.0

    def prepare(self, connect_timeout: float, read_timeout: float) -> None:
        """Timeouts for the next request; closed if the server closed it."""
        now = time.monotonic()
        idle = self.sock is not None and now - self.used > self.IDLE_CHECK
        if idle and wait_for_read(self.sock, timeout=0.0):  # readable while idle: closed
            self.close()
        self.used = now
        self.timeout, self.read_timeout = connect_timeout, read_timeout
        if self.sock is not None:
            self.sock.settimeout(read_timeout)

    def connect(self) -> None:
        made = self.pool._new_conn()  # urllib3's own, with every TLS setting of the pool
        made.timeout = self.timeout
        made.connect()
        self.sock = made.sock
        self.sock.settimeout(self.read_timeout)

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        if not isinstance(message_body, bytes) or encode_chunked:
            super()._send_output(message_body, encode_chunked=encode_chunked)  # type: ignore[misc]
            return
        self._buffer.extend((b"", message_body))  # type: ignore[attr-defined]
        request = b"\r\n".join(self._buffer)  # type: ignore[attr-defined]
        del self._buffer[:]  # type: ignore[attr-defined]
        self.send(request)


class ThroughProxy:
    """Requests through a proxy, urllib3's way end to end (whole URLs, the proxy's
    headers, a CONNECT tunnel to an HTTPS server, SOCKS)."""

    def __init__(self, manager: Any, host: str) -> None:
        self.manager, self.host = manager, host

    @contextmanager
    def exchange(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: dict[str, str],
        timeouts: tuple[float, float],
    ) -> Iterator[Response]:
        response = self.manager.urlopen(
            method,
            self.host + url,
            body=body,
            headers=headers,
            timeout=urllib3.Timeout(connect=timeouts[0], read=timeouts[1]),
            preload_content=False,
            redirect=False,
        )
        try:
            yield response
        except BaseException:
            response.close()  # a body not read to its end: the connection is not reused
            raise
        finally:
            response.release_conn()
