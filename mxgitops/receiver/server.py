"""`mxgitops receive`: the HTTP edge where forges deliver push webhooks.

The standard library's threaded HTTP server, one thread per connection and at most
`MAX_CONNECTIONS` of them (more are answered 503 at once), one request per
connection. Every answer is a JSON object with a `message`:

- `POST /webhook`: a body without Content-Length 411, over `webhook.MAX_BODY` 413
  (not read), a bad or missing signature 401, a body that is not a push event 400,
  another event or branch 202 (nothing started, the reason said), a push 202 with
  what it started (`coalesce.Decision`);
- `GET /healthz`: 200 once the CronJob's Jobs are listed (what runs is known) and while
  the receiver's threads run, else 503 saying why (the readiness probe);
- `GET /livez`: 503 once one of the receiver's threads stopped (only a restart brings
  it back: the liveness probe), else 200;
- `GET /metrics`: the receiver's counters (`metrics.ReceiverCounters`).

A client gets `read_timeout` seconds for its whole request, headers and body: a
slow client is cut off then (its socket shut), and holds only its own thread
meanwhile. Each request is one structured log line (`mxgitops.receiver.server`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from mxgitops.errors import ConfigError
from mxgitops.outputs.metrics import ReceiverCounters
from mxgitops.receiver.coalesce import Decision
from mxgitops.receiver.webhook import (
    HEADERS,
    MAX_BODY,
    MAX_DELIVERY,
    Push,
    Refusal,
    lowered,
    push_of,
    shown,
    verify,
)

LOG = logging.getLogger("mxgitops.receiver.server")
READ_TIMEOUT = 10.0  # seconds a client has to send its whole request
MAX_CONNECTIONS = 64
WEBHOOK_PATH = "/webhook"
_READ_SIZE = 64 * 1024
_DIGITS = re.compile(r"[0-9]{1,19}")  # up to 19: any more is over MAX_BODY anyway


class Starter(Protocol):
    """What the receiver hands verified pushes to (`pushsync.SyncStarter`)."""

    def push(self, push: Push) -> Decision: ...

    def unready(self) -> str:
        """Why pushes cannot be served now ("" when they can)."""
        ...

    def stopped(self) -> str:
        """Which of its threads stopped ("" while every one runs): a restart is needed."""
        ...


@dataclass(frozen=True)
class Settings:
    secret: bytes
    branch: str = ""  # "": the repository's default branch, as each push names it
    read_timeout: float = READ_TIMEOUT
    max_connections: int = MAX_CONNECTIONS


class Server(ThreadingHTTPServer):
    """A thread per connection, at most `max_connections` at a time."""

    daemon_threads = True
    block_on_close = False

    def __init__(
        self,
        address: tuple[str, int],
        starter: Starter,
        settings: Settings,
        counters: ReceiverCounters,
    ) -> None:
        self.starter, self.settings, self.counters = starter, settings, counters
        self._slots = threading.BoundedSemaphore(settings.max_connections)
        # The watchdog bounds the whole request (and answers 408); the socket's timeout,
        # longer so that the watchdog comes first, bounds each write of the answer.
        handler = type("Handler", (Handler,), {"timeout": 2 * settings.read_timeout})
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            _answer_busy(request)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except RuntimeError:
            self._slots.release()  # no thread could be started to release it
            raise
        # Anything else is SIGTERM's SystemExit, the process ending, most often while
        # `Thread.start` waits for a thread that frees the slot itself: freed twice, the
        # ValueError replaced the SystemExit, taken for the request's error, and the
        # receiver served on.

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A request's thread failed (a bug): one log line, not socketserver's traceback
        on stderr, which a JSON log cannot read."""
        LOG.error("a request failed", exc_info=True, extra={"client": str(client_address[0])})

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


def _answer_busy(request: socket.socket) -> None:
    body = b'{"message": "too many connections"}'
    head = f"HTTP/1.0 503 Service Unavailable\r\nContent-Length: {len(body)}\r\n\r\n"
    with contextlib.suppress(OSError):
        request.sendall(head.encode() + body)


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.0"  # one request per connection
    server_version = "mxgitops-receiver"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        self._late = False
        self._watchdog = threading.Timer(self.server.settings.read_timeout, self._cut_off)
        self._watchdog.daemon = True
        self._watchdog.start()

    def finish(self) -> None:
        self._watchdog.cancel()
        with contextlib.suppress(OSError):  # the client is gone
            super().finish()

    def _cut_off(self) -> None:
        """The request was not read within the read timeout: the client is too slow."""
        self._late = True
        LOG.warning(
            "a client did not send its request within %g s: cut off",
            self.server.settings.read_timeout,
            extra={"client": self.client_address[0]},
        )
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RD)  # the 408 can still be sent

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if self._late:  # the headers ended because the client was cut off
            self._answer(408, f"not sent within {self.server.settings.read_timeout:g} s")
            return False
        return True

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug(format, *args)  # http.server's own line; ours is structured

    def do_GET(self) -> None:
        if self.path == "/healthz":
            unready = self.server.starter.unready()
            self._answer(503 if unready else 200, unready or "ok")
        elif self.path == "/livez":
            stopped = self.server.starter.stopped()
            self._answer(503 if stopped else 200, stopped or "ok")
        elif self.path == "/metrics":
            body, content_type = self.server.counters.exposition()
            self._send(200, body, content_type)
        elif self.path.split("?")[0] == WEBHOOK_PATH:  # a person trying the URL a forge is given
            message = f"forges deliver to {WEBHOOK_PATH} with POST, not GET"
            self._answer(405, message, allow="POST")
        else:
            self._answer(404, f"no such path: {self.path}")

    def do_POST(self) -> None:
        if self.path.split("?")[0] != WEBHOOK_PATH:
            self._answer(404, f"no such path: {self.path}; forges deliver to {WEBHOOK_PATH}")
            return
        self.server.counters.received.inc()
        started = time.monotonic()
        fields: dict[str, Any] = {"client": self.client_address[0]}
        try:
            status, message = self._receive(fields)
        except Refusal as refusal:
            status, message = refusal.status, refusal.reason
        self._answer(status, message)
        fields.update(status=status, seconds=round(time.monotonic() - started, 4))
        LOG.info("webhook: %s %s", status, message, extra=fields)

    def _receive(self, fields: dict[str, Any]) -> tuple[int, str]:
        settings, counters = self.server.settings, self.server.counters
        body = self._body()
        self._watchdog.cancel()  # the request is read; the rest is ours
        headers = lowered(self.headers.items())
        forge = verify(headers, body, settings.secret)
        counters.verified.inc()
        _, event, delivery = (name.lower() for name in HEADERS[forge])
        fields.update(
            forge=str(forge),
            event=shown(headers.get(event, "")),
            delivery=shown(headers.get(delivery, ""), MAX_DELIVERY),
        )
        push = push_of(forge, headers, body, settings.branch)
        fields.update(ref=f"refs/heads/{shown(push.branch)}", commit=push.commit)
        decision = self.server.starter.push(push)
        fields["decision"] = decision.name.lower()
        return 202, str(decision)

    def _body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None:
            raise Refusal(411, "a Content-Length header is needed")
        # ASCII digits only: str.isdigit() takes "²", which int() refuses, and "١٢".
        if not _DIGITS.fullmatch(length.strip()):
            raise Refusal(400, f"Content-Length is not a number: {length[:32]!r}")
        size = int(length)
        if size > MAX_BODY:
            raise Refusal(413, f"the body of {size} bytes is over the limit of {MAX_BODY}")
        chunks: list[bytes] = []
        left = size
        while left:
            try:
                chunk = self.rfile.read(min(left, _READ_SIZE))
            except TimeoutError:
                chunk = b""
                self._late = True
            if self._late:
                raise Refusal(408, f"not sent within {self.server.settings.read_timeout:g} s")
            if not chunk:
                raise Refusal(400, f"the body ended after {size - left} of {size} bytes")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _answer(self, status: int, message: str, *, allow: str = "") -> None:
        self._send(status, json.dumps({"message": message}).encode(), "application/json", allow)

    def _send(self, status: int, body: bytes, content_type: str, allow: str = "") -> None:
        try:
            self.send_response(status)
            if allow:  # a 405 says which methods the path takes (RFC 9110)
                self.send_header("Allow", allow)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass  # the client left (or was cut off) before the answer


def serve(
    address: tuple[str, int],
    starter: Starter,
    settings: Settings,
    counters: ReceiverCounters,
    *,
    ready: Callable[[Server], None] | None = None,
) -> None:
    """Serve until interrupted; `ready` is called with the listening server. An address
    it cannot listen on is a ConfigError naming --listen; how it stopped is logged."""
    try:
        made = Server(address, starter, settings, counters)
    except OSError as exc:  # in use, not this host's, a privileged port
        host, port = address
        why = exc.strerror or type(exc).__name__
        raise ConfigError(f"--listen {host}:{port}: cannot listen there: {why}") from exc
    with made as server:
        where = f"{server.url}{WEBHOOK_PATH}"
        LOG.info("receiving webhooks at %s", where)
        if ready is not None:
            ready(server)
        try:
            server.serve_forever()
        except SystemExit as stop:  # SIGTERM (`console.stopped_cleanly_on_sigterm`)
            why = "SIGTERM" if stop.code == 128 + signal.SIGTERM else f"exit {stop.code}"
            LOG.info("stopped receiving webhooks at %s: %s", where, why)
            raise
        except KeyboardInterrupt:
            LOG.info("stopped receiving webhooks at %s: interrupted", where)
            raise
        LOG.info("stopped receiving webhooks at %s", where)
