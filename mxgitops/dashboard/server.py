"""`mxgitops dashboard`: the HTTP edge that serves the pages, read-only.

The standard library's threaded HTTP server, as the receiver's: a thread per
connection, at most `MAX_CONNECTIONS` (more are answered 503 at once), one request per
connection, `READ_TIMEOUT` seconds for a client to send it. GET and HEAD only, anything
else 405. Every answer carries a strict Content-Security-Policy: nothing but this
origin's stylesheet loads, no script at all, no frame may hold the page
(`frame-ancestors 'none'`), no form posts elsewhere. `GET /healthz` answers 200 once a
snapshot of the branch has been read, 503 before.

The branch is read again every `interval` seconds by one thread (`Refresher`); a
refresh that fails keeps the last snapshot and the pages say why, and the next is
tried later and later (`MAX_REFRESH_BACKOFF`) until one succeeds.
"""

from __future__ import annotations

import contextlib
import html
import logging
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from mxgitops.commands.history import Run
from mxgitops.dashboard.loading import CommitView, Loader
from mxgitops.dashboard.pages import Pages, Site
from mxgitops.dashboard.snapshot import Snapshot, clean
from mxgitops.errors import MxGitOpsError

LOG = logging.getLogger("mxgitops.dashboard.server")
READ_TIMEOUT = 10.0
MAX_CONNECTIONS = 32
MAX_PATH = 2048  # bytes of a request's path and query read
MAX_FIELDS = 16  # query parameters read
STOP_WAIT = 60.0  # seconds a refresh under way is waited for when the server stops
# Seconds between refreshes that fail, at most: twice as long after each failure (a
# remote that is down is not asked every --refresh seconds), back to --refresh after a
# success.
MAX_REFRESH_BACKOFF = 600.0
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
STATIC = {
    "/static/dashboard.css": "text/css; charset=utf-8",
    "/static/favicon.svg": "image/svg+xml",
}


class Refresher:
    """The pages' `Source`: the last snapshot, read again every `interval` seconds."""

    def __init__(self, loader: Loader, interval: float) -> None:
        self.loader, self.interval = loader, interval
        self._snapshot = Snapshot()
        self._failures = 0  # refreshes failed in a row
        self._read_once = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dashboard-refresh", daemon=True)

    def current(self) -> Snapshot:
        return self._snapshot

    def runs(self, namespace: str, name: str) -> tuple[list[Run], list[str]]:
        return self.loader.runs(namespace, name)

    def commit(self, sha: str) -> CommitView:
        return self.loader.commit(sha)

    @property
    def ready(self) -> bool:
        return self._read_once.is_set()

    def refresh(self) -> None:
        """Read the branch now; on failure keep the last snapshot, saying why."""
        try:
            self._snapshot = self.loader.read()
            self._read_once.set()
            self._failures = 0
        except Exception as failure:  # a bug too: the thread must go on refreshing
            self._failures += 1
            problem = clean(str(failure) or type(failure).__name__)
            bug = not isinstance(failure, MxGitOpsError)
            LOG.warning("refreshing the dashboard failed: %s", problem, exc_info=bug)
            self._snapshot = replace(self._snapshot, problem=problem)

    def next_wait(self) -> float:
        """Seconds until the next refresh: `interval`, doubled for each failure in a row
        up to `MAX_REFRESH_BACKOFF` (or `interval`, if longer)."""
        if not self._failures:
            return self.interval
        backoff = self.interval * (1 << min(self._failures, 32))
        return max(self.interval, min(backoff, MAX_REFRESH_BACKOFF))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=STOP_WAIT)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(self.next_wait())


class Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(
        self,
        address: tuple[str, int],
        pages: Pages,
        *,
        ready: Any = None,
        read_timeout: float = READ_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.pages, self.base_path = pages, pages.site.base_path
        self.is_ready = ready or (lambda: True)
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, type("Handler", (Handler,), {"timeout": read_timeout}))

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except RuntimeError:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        LOG.error("a request failed", exc_info=True, extra={"client": str(client_address[0])})

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}{self.base_path}/"


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.0"
    server_version = "mxgitops-dashboard"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug(format, *args)

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def _refuse(self) -> None:
        self._send(405, "text/plain; charset=utf-8", b"read-only: GET and HEAD only\n", False)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _refuse

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (a bad request line, an unknown method) with our
        headers: 501 for a method it does not know is 405 here, as for the others."""
        code = 405 if code == 501 else code
        text = f"{code} {html.escape(message or '')}\n".encode()
        self._send(code, "text/plain; charset=utf-8", text, self.command == "HEAD")

    def _serve(self, *, head: bool) -> None:
        if len(self.path) > MAX_PATH:
            self._send(414, "text/plain; charset=utf-8", b"the URL is too long\n", head)
            return
        parts = urlsplit(self.path)
        path = unquote(parts.path, errors="replace")
        base = self.server.base_path
        if base and path == base:
            self._redirect(base + "/")
            return
        if base and not path.startswith(base + "/"):
            self._send(404, "text/plain; charset=utf-8", b"not under the base path\n", head)
            return
        path = path[len(base) :]
        if path == "/healthz":
            ready = self.server.is_ready()
            self._send(
                200 if ready else 503, "text/plain", b"ok\n" if ready else b"reading\n", head
            )
            return
        if path in STATIC:
            body = resources.files("mxgitops.dashboard").joinpath(path[1:]).read_bytes()
            self._send(200, STATIC[path], body, head, cache="public, max-age=3600")
            return
        try:
            params = parse_qs(parts.query, max_num_fields=MAX_FIELDS)
        except ValueError:
            self._send(400, "text/plain; charset=utf-8", b"too many query parameters\n", head)
            return
        try:
            answer = self.server.pages.answer(path, params)
        except MxGitOpsError as failure:
            text = f"the jobs repository could not be read: {clean(str(failure))}\n"
            self._send(503, "text/plain; charset=utf-8", text.encode(), head)
            return
        self._send(answer.status, "text/html; charset=utf-8", answer.body.encode(), head)

    def _redirect(self, location: str) -> None:
        self.send_response(308)
        self.send_header("Location", location)
        self._common_headers(0, "text/plain", "no-store")
        self.end_headers()

    def _send(
        self, status: int, content_type: str, body: bytes, head: bool, cache: str = "no-store"
    ) -> None:
        try:
            self.send_response(status)
            if status == 405:
                self.send_header("Allow", "GET, HEAD")
            self._common_headers(len(body), content_type, cache)
            self.end_headers()
            if not head:
                self.wfile.write(body)
        except OSError:
            pass  # the client left

    def _common_headers(self, length: int, content_type: str, cache: str) -> None:
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        self.send_header("Cache-Control", cache)
        for name, value in HEADERS.items():
            self.send_header(name, value)


def serve(
    address: tuple[str, int],
    refresher: Refresher,
    site: Site,
    *,
    ready: Any = None,
) -> None:
    """Serve until interrupted; `ready` is called with the listening server."""
    pages = Pages(refresher, site)
    with Server(address, pages, ready=lambda: refresher.ready) as server:
        LOG.info("serving the dashboard at %s", server.url)
        if ready is not None:
            ready(server)
        server.serve_forever()
