"""The connections of `transport.Transport` to one API server, and one request's
exchange over them: the request sent, the answer handed over, the connection kept
for the next request only when the answer was read to its end.

Imported when a `Transport` is built: urllib3, ssl and httptools are no cost of
commands that need no cluster.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httptools
import urllib3
from urllib3.util.wait import wait_for_read

from mxgitops.errors import ClusterError
from mxgitops.kube.exchange import Response

# What an exchange raises when no answer came: the socket's errors (a reset, a
# timeout, an answer cut short), a malformed answer, and urllib3's through a proxy.
UNANSWERED = (OSError, httptools.HttpParserError, urllib3.exceptions.HTTPError)

_RECEIVE_SIZE = 64 * 1024  # bytes asked of the socket at a time
_MAX_HEAD = 1024 * 1024  # bytes of status line and headers read before giving up on them
_DEFAULT_PORTS = {"http": 80, "https": 443}


class Direct:
    """Requests straight to the server, each over a connection of its own while it
    lasts, kept for the next request when its answer was read to the end. urllib3
    makes each connection (socket options, TLS, certificates, the server's name);
    requests go out in one write and answers are parsed by llhttp (httptools, the
    C parser of uvicorn). Through urllib3's pool, or http.client's email-package
    header parsing, a request costs a writer several times the CPU, under the GIL all
    writers share, and that bounds a first sync on a small machine (docs/development:
    measurements)."""

    def __init__(self, pool: Any, prefix: str, *, keep: int) -> None:
        self.pool, self.prefix, self.keep = pool, prefix, keep
        port = pool.port or _DEFAULT_PORTS[pool.scheme]
        host = f"[{pool.host}]" if ":" in pool.host else pool.host  # an IPv6 address
        self.host = host if port == _DEFAULT_PORTS[pool.scheme] else f"{host}:{port}"
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
        deadline: float,
        before_send: Callable[[], None],
    ) -> Iterator[Answer]:
        with self._lock:
            connection = self._idle.pop() if self._idle else Connection(self.pool)
        answer = None
        try:
            connection.prepare(*timeouts)
            head = _head(method, self.prefix + url, {"Host": self.host, **headers}, body)
            before_send()
            connection.sock.sendall(head + body if body is not None else head)
            answer = Answer(connection.sock, deadline)
            yield answer
        finally:
            # Kept only after an answer read to its end (a refusal's too): the next
            # request must not find the rest of this one's body on the connection.
            if answer is not None and answer.reusable():
                self._keep(connection)
            else:
                connection.close()

    def _keep(self, connection: Connection) -> None:
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append(connection)
                return
        connection.close()


def _head(method: str, target: str, headers: dict[str, str], body: bytes | None) -> bytes:
    """A request's line and headers, sent with its body in one write (one system call,
    the server woken once)."""
    lines = [
        f"{method} {target} HTTP/1.1",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    if any("\r" in line or "\n" in line for line in lines):  # a header smuggled in a value
        path = target.split("?")[0]
        raise ClusterError(f"not sent: a line break in the request {method} {path} or a header")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class Connection:
    """A socket urllib3 connected. A kept one is checked before it is used again: one
    the server closed meanwhile (its idle timeout) would fail the request, and bytes
    it sent unasked would be read as the next request's answer."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.sock: Any = None

    def prepare(self, connect_timeout: float, read_timeout: float) -> None:
        """Connected, with the timeout of each wait for the next answer."""
        if self.sock is not None and wait_for_read(self.sock, timeout=0.0):  # EOF, or unasked
            self.close()
        if self.sock is None:
            made = self.pool._new_conn()  # urllib3's own, with every TLS setting of the pool
            made.timeout = connect_timeout
            made.connect()
            self.sock = made.sock
        self.sock.settimeout(read_timeout)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class Answer:
    """An answer read from a socket as the caller asks for its body (`exchange.Response`):
    its status line and headers first, the body then in pieces of at most the size
    asked for (a LIST's body is never held whole). Every wait for the socket ends by
    `deadline` (time.monotonic()): a server that sends a byte now and then, each wait
    short, still cannot make the answer outlast its call's timeout."""

    def __init__(self, sock: Any, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline
        self._parser = httptools.HttpResponseParser(self)
        self._reason = bytearray()
        self._body = bytearray()
        self.headers = urllib3.HTTPHeaderDict()
        self.status, self.reason = 0, ""
        self._head_read = self._ended = self._keep_alive = False
        received = 0
        while not self._head_read:
            if received > _MAX_HEAD:
                raise ConnectionError(f"an answer whose headers run over {_MAX_HEAD} bytes")
            received += self._receive()
        self.status = self._parser.get_status_code()
        self.reason = self._reason.decode("latin-1")

    def read(self, amount: int | None = None, /) -> bytes:
        """The next `amount` bytes of the body (fewer only at its end), or all the rest."""
        while not self._ended and (amount is None or len(self._body) < amount):
            self._receive()
        taken = bytes(self._body[:amount])
        del self._body[:amount]
        return taken

    def reusable(self) -> bool:
        """Read to its end, and the server keeps the connection open."""
        return self._ended and self._keep_alive and not self._body

    def _receive(self) -> int:
        """Bytes received and parsed (0 at the end of an answer whose end is the
        connection's)."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the answer did not end within the call's timeout")
        self._sock.settimeout(left)
        data = self._sock.recv(_RECEIVE_SIZE)
        if data:
            self._parser.feed_data(data)
            return len(data)
        if self._head_read and not self._delimited():
            self._ended = True  # a body that ends when the connection does (HTTP/1.0's way)
            return 0
        raise ConnectionResetError("Connection reset: the server closed the connection")

    def _delimited(self) -> bool:
        return "Content-Length" in self.headers or "Transfer-Encoding" in self.headers

    # httptools' callbacks, as the parser meets each part of the answer. Bytes after
    # its end (a server gone wrong) are no part of it, and the connection is not kept.
    def on_message_begin(self) -> None:
        self._keep_alive = False

    def on_status(self, part: bytes) -> None:
        if not self._ended:
            self._reason += part

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._ended:
            self.headers.add(name.decode("latin-1"), value.decode("latin-1"))

    def on_headers_complete(self) -> None:
        self._head_read = True

    def on_body(self, part: bytes) -> None:
        if not self._ended:
            self._body += part

    def on_message_complete(self) -> None:
        # Asked now: once the parser returns, it has forgotten the answer's headers.
        if not self._ended:
            self._ended, self._keep_alive = True, self._parser.should_keep_alive()


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
        deadline: float,
        before_send: Callable[[], None],
    ) -> Iterator[Response]:
        before_send()  # urllib3 connects and sends in one call
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
            yield _Deadlined(response, deadline)
        except BaseException:
            response.close()  # a body not read to its end: the connection is not reused
            raise
        finally:
            response.release_conn()


class _Deadlined:
    """urllib3's response, whose reads end by `deadline`: urllib3 bounds each wait for
    the socket, not the answer, so the time is checked before every read."""

    def __init__(self, response: Any, deadline: float) -> None:
        self._response, self._deadline = response, deadline
        self.status, self.reason, self.headers = response.status, response.reason, response.headers

    def read(self, amount: int | None = None, /) -> bytes:
        if time.monotonic() >= self._deadline:
            raise TimeoutError("the answer did not end within the call's timeout")
        data: bytes = self._response.read(amount)
        return data
