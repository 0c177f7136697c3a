"""A loopback HTTP server standing in for a chat's incoming webhook: it keeps every
request (path, headers, body) and answers as a test scripts it (a status per
request, or holding the answer until the test lets it go)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class ChatServer:
    url: str
    requests: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # answered in turn; then 200
    hold: threading.Event | None = None  # set: answer; unset: hang until it is

    def received(self, path: str = "") -> list[Received]:
        return [r for r in self.requests if r.path.endswith(path)]


@contextmanager
def chat_server() -> Iterator[ChatServer]:
    state = ChatServer("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            state.requests.append(Received(self.path, dict(self.headers.items()), body))
            if state.hold is not None:
                state.hold.wait(30)
            status = state.statuses.pop(0) if state.statuses else 200
            try:
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the sender stopped waiting (its deadline): what a hanging chat does

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        if state.hold is not None:
            state.hold.set()
        server.shutdown()
        server.server_close()


def notifications_file(
    directory: Path, url: str, *providers: str, dashboard: str = "", **extra: Any
) -> Path:
    """A notifications file with one destination per provider, each at url/<provider>,
    its address in a file beside it (generic-hmac's key too: `s3cret`)."""
    import yaml

    entries = []
    for provider in providers:
        (directory / f"{provider}.url").write_text(f"{url}/{provider}\n")
        entry: dict[str, Any] = {
            "provider": provider,
            "addressFile": f"{provider}.url",
            "events": ["failed", "succeeded", "disrupted", "waiting", "sync-failed"],
            **extra,
        }
        if provider == "generic-hmac":
            (directory / "hmac.key").write_text("s3cret\n")
            entry["secretFile"] = "hmac.key"
        entries.append(entry)
    data: dict[str, Any] = {"notifications": entries}
    if dashboard:
        data["dashboardURL"] = dashboard
    path = directory / "notifications.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
