"""A loopback TLS proxy in front of the real API server that injects the double's faults.

Faults are the API double's own (``tests/kubeapi/faults.py``: 500, 503, 429 with
Retry-After, delays, dropped connections, ``lose`` = the server acts but the answer
never arrives, ``hang``), decided per request by the same seeded rules, so a fault
test says the same thing to either backend. What is not faulted is forwarded to
kube-apiserver under the identity mxgitops runs as in tests (or, when the client
sends a bearer token, a ServiceAccount's, under that token), and the real answer
comes back unchanged. The proxy keeps the double's request log too: it sees the
requests that a fault kept from ever reaching the server.

Only the client-to-server leg can be faulted here; what happens inside the server
(etcd, the controllers) stays as it is: tests needing that stay on the double.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
import traceback
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import requests

from tests.kubeapi.errors import ApiError
from tests.kubeapi.faults import Faults, RequestLog, list_status
from tests.kubeapi.server import MethodHandler, log_entry

from .pki import KeyPair

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}
)


class FaultProxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, upstream: str, ca: str, identity: KeyPair, serving: KeyPair, log: RequestLog
    ) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.upstream = upstream
        self.faults = Faults()
        self.log = log
        self.session = requests.Session()  # as the tests' mxgitops identity
        self.session.trust_env = False
        self.session.verify = ca
        self.session.cert = (str(identity.cert), str(identity.key))
        self.bearer_session = requests.Session()  # a client with a token speaks for itself
        self.bearer_session.trust_env = False
        self.bearer_session.verify = ca
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(serving.cert), str(serving.key))
        # The handshake is the connection's own thread's (Handler.setup): done in accept,
        # on the serving thread, one slow client would hold up every other.
        self.socket = context.wrap_socket(
            self.socket, server_side=True, do_handshake_on_connect=False
        )
        self.problems: list[str] = []  # what failed on the proxy's side (`handle_error`)
        self._thread = threading.Thread(target=self.serve_forever, name="proxy", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Kept, not printed: a test that fails shows them (`RealCluster.proxy_problems`)."""
        self.problems.append(f"{client_address}: {traceback.format_exc().splitlines()[-1]}")

    def stop(self) -> None:
        self.faults.release_hung()
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=5)


class Handler(MethodHandler):
    server: FaultProxy
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        self.request.do_handshake()
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the request log says what happened."""

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        entry = log_entry(method, url.path, query)
        decision = (
            self.server.faults.decide(entry["verb"], entry["resource"]) if entry["verb"] else None
        )
        try:
            if decision is not None:
                if decision.delay_ms:
                    time.sleep(decision.delay_ms / 1000)  # the fault asked for this latency
                if decision.hang or decision.drop:
                    entry.update(fault="hang" if decision.hang else "drop", dropped=True)
                    self.server.log.append(entry)
                    if decision.hang:
                        self.server.faults.hang()
                    self._close()
                    return
                if decision.error is not None:
                    entry["fault"] = str(decision.error.code)
                    self._answer_error(entry, decision.error)
                    return
                if decision.ended and entry["verb"] == "watch":
                    entry.update(fault="ended", status=200)
                    self.server.log.append(entry)
                    self.answer_ended_watch()
                    return
                if decision.list_body and entry["verb"] == "list":
                    status = list_status(decision.list_body, query)
                    entry.update(fault=decision.list_body, status=status)
                    self.server.log.append(entry)
                    self.answer_list_fault(decision.list_body, query, self.server.faults.released())
                    return
                if decision.lose:
                    entry.update(fault="lose", dropped=True)
                    self._forward(method, body, entry, answer=False)
                    self._close()
                    return
            self._forward(method, body, entry, answer=True)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _close(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _answer_error(self, entry: dict[str, Any], error: ApiError) -> None:
        import json

        entry["status"] = error.code
        self.server.log.append(entry)
        data = json.dumps(error.status()).encode()
        self.send_response(error.code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in error.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _forward(self, method: str, body: bytes, entry: dict[str, Any], answer: bool) -> None:
        headers = {
            key: value
            for key, value in self.headers.items()
            if key.lower() in ("content-type", "accept", "user-agent", "authorization")
        }
        bearer = any(key.lower() == "authorization" for key in headers)
        session = self.server.bearer_session if bearer else self.server.session
        with session.request(
            method,
            self.server.upstream + self.path,
            data=body or None,
            headers=headers,
            stream=True,
            timeout=(10, None),
        ) as response:
            entry["status"] = response.status_code
            self.server.log.append(entry)
            if not answer:
                return
            self.send_response(response.status_code)
            for key, value in response.headers.items():
                if key.lower() not in HOP_BY_HOP:
                    self.send_header(key, value)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in response.raw.stream(64 * 1024, decode_content=True):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
