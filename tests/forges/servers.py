"""Loopback servers that answer as GitHub's and GitLab's commit-status APIs document.

Only what mxgitops uses, with the documented rules it must live with (each named where
it is enforced):

GitHub, REST API "Commit statuses" and "Rate limits for the REST API":
- G1 "There is a limit of 1000 statuses per sha and context within a repository.
  Attempts to create more than 1000 statuses will result in a validation error" (422).
- G2 the description is "a short description of the status", at most 140 characters:
  a longer one is refused with 422.
- G3 "Get the combined status for a specific reference": the latest status of each
  context, newest first.
- G4 secondary rate limits: "a 403 or 429 response"; "If the retry-after response
  header is present, you should not retry your request until after that many seconds
  has elapsed"; without it, "wait for at least one minute".
- G5 a request without a valid token gets 401 ("Requires authentication").
- G6 the primary rate limit: "If the x-ratelimit-remaining header is 0, you should not
  retry your request until after the time specified by the x-ratelimit-reset header"
  (in UTC epoch seconds).

GitLab, "Commit status API":
- L1 states pending, running, success, failed, canceled (skipped).
- L2 a status is found by name, ref and SHA among those pending or running, and moved
  along its state machine; a move it does not allow answers 400 "Cannot transition
  status via :EVENT from :STATE"; a status that finished is followed by a new one.
- L3 `GET /projects/:id/repository/commits/:sha/statuses` lists them, newest first.

Time is not real here: a rate limit lasts for a number of requests, so a test tells
how long the client says it waited from the waits it recorded, not from a clock.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

GITHUB_MAX_STATUSES = 1000
GITHUB_MAX_DESCRIPTION = 140


@dataclass
class Limit:
    """The next `requests` requests are refused with this rate limit."""

    requests: int
    status: int = 403
    retry_after: str | None = "7"
    message: str = "You have exceeded a secondary rate limit."
    headers: dict[str, str] = field(default_factory=dict)  # G6: x-ratelimit-*


@dataclass
class Forge:
    token: str
    statuses: dict[tuple[str, str, str], list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    limit: Limit | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    base: str = ""
    unknown: set[str] = field(default_factory=set)  # commits it does not have: 404

    def posts(self) -> list[tuple[str, str]]:
        return [r for r in self.requests if r[0] == "POST"]

    def latest(self, repo: str, sha: str, context: str) -> dict[str, Any] | None:
        found = self.statuses.get((repo, sha, context))
        return found[-1] if found else None


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        forge = self.server.forge
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        with forge.lock:
            forge.requests.append((method, self.path))
            limit = forge.limit
            if limit is not None and limit.requests > 0:
                limit.requests -= 1
                headers = {"Retry-After": limit.retry_after} if limit.retry_after else {}
                headers.update(limit.headers)
                return self._answer(limit.status, {"message": limit.message}, headers)
            if not self.server.authorized(self.headers):
                return self._answer(401, {"message": "Requires authentication"})
            status, answer = self.server.route(method, self.path, body)
        self._answer(status, answer)

    def _answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    forge: Forge

    def authorized(self, headers: Any) -> bool:
        raise NotImplementedError

    def route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        raise NotImplementedError


class _GitHub(_Server):
    def authorized(self, headers: Any) -> bool:
        return bool(headers.get("Authorization") == f"Bearer {self.forge.token}")

    def route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        forge, url = self.forge, urlsplit(path)
        combined = re.fullmatch(r"/repos/([^/]+/[^/]+)/commits/([0-9a-f]+)/status", url.path)
        if method == "GET" and combined:  # G3
            repo, sha = combined.groups()
            if sha in forge.unknown:
                return 404, {"message": f"No commit found for SHA: {sha}"}
            latest = [
                found[-1] for (r, s, _), found in forge.statuses.items() if (r, s) == (repo, sha)
            ]
            latest.sort(key=lambda status: -status["id"])
            return 200, {"sha": sha, "statuses": latest, "total_count": len(latest)}
        create = re.fullmatch(r"/repos/([^/]+/[^/]+)/statuses/([0-9a-f]+)", url.path)
        if method == "POST" and create:
            repo, sha = create.groups()
            context = body.get("context") or "default"
            found = forge.statuses.setdefault((repo, sha, context), [])
            if len(found) >= GITHUB_MAX_STATUSES:  # G1
                return 422, _validation(
                    "This SHA and context has reached the maximum number of statuses."
                )
            if len(body.get("description") or "") > GITHUB_MAX_DESCRIPTION:  # G2
                return 422, _validation("description is too long (maximum is 140 characters)")
            if body.get("state") not in ("pending", "success", "failure", "error"):
                return 422, _validation("state is not included in the list")
            status = {
                "id": _next_id(forge),
                "context": context,
                "state": body["state"],
                "description": body.get("description"),
                "target_url": body.get("target_url"),
            }
            found.append(status)
            return 201, status
        return 404, {"message": "Not Found"}


class _GitLab(_Server):
    _MOVES: ClassVar[dict[str, tuple[str, ...]]] = {  # L2: event -> the states it moves from
        "enqueue": ("created",),
        "run": ("created", "pending"),
        "success": ("created", "pending", "running"),
        "drop": ("created", "pending", "running"),
        "cancel": ("created", "pending", "running"),
    }
    _EVENTS: ClassVar[dict[str, str]] = {
        "pending": "enqueue",
        "running": "run",
        "success": "success",
        "failed": "drop",
        "canceled": "cancel",
    }

    def authorized(self, headers: Any) -> bool:
        return bool(headers.get("PRIVATE-TOKEN") == self.forge.token)

    def route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        forge, url = self.forge, urlsplit(path)
        listed = re.fullmatch(
            r"/projects/([^/]+)/repository/commits/([0-9a-f]+)/statuses", url.path
        )
        if method == "GET" and listed:  # L3
            repo, sha = unquote(listed.group(1)), listed.group(2)
            name = parse_qs(url.query).get("name", [None])[0]
            found = [
                s
                for (r, h, c), all_ in forge.statuses.items()
                if (r, h) == (repo, sha) and (name is None or c == name)
                for s in all_
            ]
            return 200, sorted(found, key=lambda status: -status["id"])
        create = re.fullmatch(r"/projects/([^/]+)/statuses/([0-9a-f]+)", url.path)
        if method == "POST" and create:
            repo, sha = unquote(create.group(1)), create.group(2)
            state, name = body.get("state"), body.get("name") or "default"
            if state not in self._EVENTS:  # L1
                return 400, {"message": "state does not have a valid value"}
            found = forge.statuses.setdefault((repo, sha, name), [])
            current = found[-1] if found and found[-1]["status"] in ("pending", "running") else None
            before = current["status"] if current else "created"
            event = self._EVENTS[state]
            if before not in self._MOVES[event]:  # L2
                return 400, {"message": f"Cannot transition status via :{event} from :{before}"}
            if current is None:
                current = {"id": _next_id(forge), "name": name}
                found.append(current)
            current.update(
                status=state, description=body.get("description"), target_url=body.get("target_url")
            )
            return 201, current
        return 404, {"message": "404 Not Found"}


def _validation(message: str) -> dict[str, Any]:
    return {
        "message": "Validation Failed",
        "errors": [{"resource": "Status", "code": "custom", "message": message}],
    }


def _next_id(forge: Forge) -> int:
    return sum(len(found) for found in forge.statuses.values()) + 1


@contextmanager
def serving(kind: str, token: str = "forge-token") -> Iterator[Forge]:
    """A GitHub (`github`) or GitLab (`gitlab`) on 127.0.0.1, for the `with` block."""
    server: _Server = (_GitHub if kind == "github" else _GitLab)(("127.0.0.1", 0), _Handler)
    forge = Forge(token)
    server.forge = forge
    forge.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield forge
    finally:
        server.shutdown()
        server.server_close()


DRIP_INTERVAL = 0.5  # seconds between bytes: shorter than any read timeout the tests set


@contextmanager
def dripping(body_bytes: int = 120) -> Iterator[str]:
    """A server on 127.0.0.1 that answers every request one byte every DRIP_INTERVAL,
    its status line and headers too: no socket read ever waits long, and the whole
    answer takes a minute. Its URL, for the `with` block."""
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    answer += f"Content-Length: {body_bytes}\r\n\r\n".encode() + b" " * body_bytes

    def drip(connection: socket.socket) -> None:
        with connection:
            connection.recv(1 << 16)
            for byte in answer:
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    return
                if stop.wait(DRIP_INTERVAL):  # the server's pace, not a test's wait
                    return

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=drip, args=(connection,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


@dataclass
class Recorded:
    """What a recording server was sent: (method, path, headers) per request, and the
    bodies."""

    url: str = ""
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)


@contextmanager
def recording(status: int = 200) -> Iterator[Recorded]:
    """A server on 127.0.0.1 that answers every request `status` with an empty body
    and records it."""
    recorded = Recorded()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _record(self) -> None:
            recorded.bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            recorded.requests.append((self.command, self.path, dict(self.headers)))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_PUT = _record

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    recorded.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield recorded
    finally:
        server.shutdown()
        server.server_close()
