"""HTTP front end: routing, the Kubernetes REST paths, watch streams, /_kubeapi.

Kubernetes paths served (namespaced resources only; any namespace exists
implicitly and ``GET /api/v1/namespaces/{ns}`` returns it as Active):

* ``/api/v1/namespaces/{ns}/{plural}[/{name}[/status]]`` and
  ``/apis/{group}/{version}/namespaces/{ns}/{plural}[/{name}[/status]]``;
* ``/api/v1/{plural}`` and ``/apis/{group}/{version}/{plural}`` (all
  namespaces; list and watch);
* discovery and OpenAPI (:mod:`.discovery`).

Control-plane endpoints live under ``/_kubeapi/`` (no Kubernetes path starts
with ``_``), are never subject to faults and never appear in the request log:

==========================  ================================================
``GET /_kubeapi/healthz``   ``ok``
``POST /_kubeapi/job-controller``  body ``{"namespace"?}``; -> ``{"created": [pod names]}``
``POST /_kubeapi/kubelet``  body ``{"pod"|"job", "namespace"?, "phase", "container"?,
                            "exitCode"?, "reason"?, "message"?, "restartState"?}``
                            -> ``{"pods": [names]}``
``POST /_kubeapi/clock``    body ``{"advanceSeconds": N}``
``POST /_kubeapi/compact``  forget the watch history (watches from older RVs get 410)
``GET|PUT|DELETE /_kubeapi/faults``  body ``{"spec", "seed"?, "retryAfter"?}``
``GET|DELETE /_kubeapi/requests``   the request log / clear it
``GET /_kubeapi/objects/{plural}[?namespace=ns]``  stored objects, as stored
==========================  ================================================
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from . import discovery, errors
from . import faults as faults_module
from .controlplane import ControlPlane
from .errors import ApiError
from .faults import Faults, RequestLog
from .podlogs import PodLogs
from .resources import BY_PATH, Resource, resource
from .rest import Rest
from .selectors import match_fields, match_labels, parse_field_selector, parse_label_selector
from .store import Event, Store, compact_json

JSON = "application/json"
CONTROL_PREFIX = "/_kubeapi/"
_date = (0, "")  # the Date header of the current second


@dataclass
class Route:
    verb: str
    res: Resource
    namespace: str | None
    name: str = ""
    subresource: str = ""


class KubeAPIServer(ThreadingHTTPServer):
    """The HTTP server plus the state behind it (store, control plane, faults, log)."""

    daemon_threads = True
    # kube-apiserver (Go's net.Listen) takes the system's full backlog; socketserver's
    # default of 5 drops the SYNs of a client opening more connections at once (16
    # writers), which then connect only after the 1 s SYN retransmit.
    request_queue_size = socket.SOMAXCONN

    def __init__(
        self,
        address: tuple[str, int],
        seed: int | None = None,
        log: RequestLog | None = None,
        faults: Faults | None = None,
    ) -> None:
        self.store = Store(seed)
        self.rest = Rest(self.store)
        self.control = ControlPlane(self.rest)
        self.pod_logs = PodLogs(self.store.now)
        self.faults = faults or Faults()
        self.log = log or RequestLog()
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def stop(self) -> None:
        """Stop serving, end watches and close every open connection."""
        self.store.close()
        self.faults.release_hung()
        self.shutdown()
        self.server_close()
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


# (method, whether the path names an object) -> verb; a GET of a collection with
# ?watch=true is a watch.
_VERBS = {
    ("GET", False): "list",
    ("GET", True): "get",
    ("POST", False): "create",
    ("PUT", True): "update",
    ("PATCH", True): "patch",
    ("DELETE", True): "delete",
    ("DELETE", False): "deletecollection",
}


def route_of(method: str, path: str, query: dict[str, str]) -> Route | None:
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
        prefix, rest = "/api/v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        prefix, rest = f"/apis/{parts[1]}/{parts[2]}", parts[3:]
    else:
        return None
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    res = BY_PATH.get((prefix, rest[0])) if rest else None
    if res is None or len(rest) > 3:
        return None
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and not (sub == "status" and res.has_status) and (sub, res.plural) != ("log", "pods"):
        return None
    verb = _VERBS.get((method, bool(name)), "")
    if verb == "list" and query.get("watch", "") in ("true", "1"):
        verb = "watch"
    if namespace is None and verb not in ("list", "watch"):
        verb = ""  # cluster-wide writes of namespaced resources are not served
    return Route(verb, res, namespace, name, sub)


def _request_info(method: str, path: str) -> tuple[str, str]:
    """(verb, resource) of an API path, served or not, as kube-apiserver names them."""
    parts = [p for p in path.split("/") if p]
    rest = parts[2:] if parts[:2] == ["api", "v1"] else parts[3:] if parts[:1] == ["apis"] else []
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    if not rest:
        return "", ""
    return _VERBS.get((method, len(rest) > 1), ""), rest[0]


def _watch_frame(kind: str, obj: dict[str, Any]) -> bytes:
    return compact_json({"type": kind, "object": obj}) + b"\n"


class Headers:
    """A request's headers as http.server's ``email.message.Message`` offers them
    (case-insensitive ``get``, the first of repeated names; ``get_all``), read without
    the email parser, which cost a third of the double's CPU per request."""

    __slots__ = ("_first", "_items")

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self._items = items
        # Built backwards, so that the first of a repeated name is the one left.
        self._first = {name.lower(): value for name, value in reversed(items)}

    def get(self, name: str, default: Any = None) -> Any:
        return self._first.get(name.lower(), default)

    def __getitem__(self, name: str) -> str | None:
        return self._first.get(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._first

    def get_all(self, name: str, failobj: Any = None) -> list[str] | Any:
        found = [v for k, v in self._items if k.lower() == name.lower()]
        return found or failobj

    def items(self) -> list[tuple[str, str]]:
        return list(self._items)

    def keys(self) -> list[str]:
        return [k for k, _ in self._items]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._items)


def read_headers(rfile: Any) -> Headers:
    """The header block of a request, as http.client reads it (at most 100 lines of at
    most 64 KiB; a line starting with white space continues the previous header)."""
    items: list[tuple[str, str]] = []
    readline = rfile.readline
    while True:
        line = readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise http.client.LineTooLong("header line")
        if line in _END_OF_HEADERS:
            return Headers(items)
        if len(items) >= _MAX_HEADERS:
            raise http.client.HTTPException(f"got more than {_MAX_HEADERS} headers")
        text = line.decode("iso-8859-1")
        if text[0] in " \t" and items:
            name, value = items[-1]
            items[-1] = (name, f"{value} {text.strip()}".strip())
            continue
        name, sep, value = text.partition(":")
        if sep:
            items.append((name, value.strip()))


_MAX_LINE = 65536
_MAX_HEADERS = 100
_END_OF_HEADERS = frozenset((b"\r\n", b"\n", b""))


class MethodHandler(BaseHTTPRequestHandler):
    """Every HTTP method of the Kubernetes API to one ``_dispatch(method)``."""

    raw_requestline: bytes
    _headers_buffer: list[bytes]

    def answer_list_fault(self, action: str, query: dict[str, str], stop: threading.Event) -> int:
        """Answer a LIST as a server gone wrong would (`faults.list_body`), chunked;
        the status sent. An endless body ends when the client goes away."""
        if faults_module.list_status(action, query) == 410:
            error = faults_module.expired()
            data = json.dumps(error.status()).encode()
            head = (
                f"HTTP/1.1 410 Gone\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n"
            )
            self.wfile.write(head.encode("latin-1") + data)
            return 410
        self.close_connection = True
        self.wfile.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        try:
            for chunk in faults_module.list_body(action, stop):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client gave up on the answer, as it should
        return 200

    def answer_ended_watch(self) -> int:
        """Answer a watch as a server that ends every watch at once: a 200 whose chunked
        stream ends before any event."""
        self.close_connection = True
        self.wfile.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        )
        return 200

    def parse_request(self) -> bool:
        """http.server's, with the headers read by `read_headers` instead of the email
        parser: the request line checked, then Connection and Expect honoured."""
        self.command = None  # type: ignore[assignment]
        self.request_version = version = self.default_request_version
        self.close_connection = True
        requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        self.requestline = requestline
        words = requestline.split()
        if not words:
            return False
        if len(words) >= 3:
            version = words[-1]
            number = version[5:].split(".") if version.startswith("HTTP/") else []
            if len(number) != 2 or not all(n.isdigit() and len(n) <= 10 for n in number):
                self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request version ({version!r})")
                return False
            major, minor = int(number[0]), int(number[1])
            if (major, minor) >= (1, 1) and self.protocol_version >= "HTTP/1.1":
                self.close_connection = False
            if major >= 2:
                self.send_error(
                    HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"Invalid HTTP version ({version[5:]})"
                )
                return False
            self.request_version = version
        if not 2 <= len(words) <= 3:
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request syntax ({requestline!r})")
            return False
        command, path = words[:2]
        if len(words) == 2:
            self.close_connection = True
            if command != "GET":
                self.send_error(HTTPStatus.BAD_REQUEST, f"Bad HTTP/0.9 request type ({command!r})")
                return False
        self.command, self.path = command, path
        if self.path.startswith("//"):
            self.path = "/" + self.path.lstrip("/")
        try:
            self.headers = read_headers(self.rfile)  # type: ignore[assignment]
        except http.client.LineTooLong as err:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long", str(err))
            return False
        except http.client.HTTPException as err:
            self.send_error(
                HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers", str(err)
            )
            return False
        connection = (self.headers.get("Connection") or "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive" and self.protocol_version >= "HTTP/1.1":
            self.close_connection = False
        expect = (self.headers.get("Expect") or "").lower()
        if (
            expect == "100-continue"
            and self.protocol_version >= "HTTP/1.1"
            and self.request_version >= "HTTP/1.1"
        ):
            return self.handle_expect_100()
        return True

    def _dispatch(self, method: str) -> None:
        raise NotImplementedError

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")


def log_entry(method: str, path: str, query: dict[str, str]) -> dict[str, Any]:
    """A request log entry (status 0 until answered) and what it routes to."""
    return routed_entry(method, path, query, route_of(method, path, query))


def routed_entry(
    method: str, path: str, query: dict[str, str], route: Route | None
) -> dict[str, Any]:
    """`log_entry` of a request already routed (`route_of`'s answer). A request for a
    resource the double does not serve (a CRD's: JobSets) is logged with the verb and
    resource kube-apiserver's audit log gives it, which it resolves from the path alone."""
    verb, resource = (route.verb, route.res.plural) if route else _request_info(method, path)
    return {
        "method": method,
        "path": path,
        "query": query,
        "verb": verb,
        "resource": resource,
        "status": 0,
        "fault": None,
        "dropped": False,
    }


class Handler(MethodHandler):
    protocol_version = "HTTP/1.1"
    server: KubeAPIServer
    server_version = "kubeapi-double"
    # Headers and body leave in two writes; without TCP_NODELAY the body waits
    # for the client's delayed ACK of the headers (~40 ms per response).
    disable_nagle_algorithm = True
    _entry: dict[str, Any] | None = None

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log; see the request log instead."""

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The Date header's value, formatted once a second rather than per response."""
        if timestamp is not None:
            return super().date_time_string(timestamp)
        global _date  # one (second, text) pair: a race only formats it twice
        now = int(time.time())
        if _date[0] != now:
            _date = (now, super().date_time_string(now))
        return _date[1]

    # -- plumbing --------------------------------------------------------------
    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(
        self,
        code: int,
        payload: Any,
        headers: dict[str, str] | None = None,
        warnings: list[str] | None = None,
    ) -> int:
        # Compact, as kube-apiserver encodes (and fewer bytes to send and read).
        data = payload if isinstance(payload, bytes) else compact_json(payload)
        self._record(code)
        if self.request_version == "HTTP/0.9":  # no status line, no headers
            self.wfile.write(data)
            return code
        # The head that send_response and send_header would buffer line by line,
        # formatted at once; head and body in one write: one send, one wake-up of
        # the client.
        reason = self.responses[code][0] if code in self.responses else ""
        head = (
            f"{self.protocol_version} {code} {reason}\r\n"
            f"Server: {self.version_string()}\r\n"
            f"Date: {self.date_time_string()}\r\n"
            f"Content-Type: {JSON}\r\n"
            "Cache-Control: no-cache, private\r\n"
            f"Content-Length: {len(data)}\r\n"
        )
        if headers or warnings:  # rare: a Retry-After, an unknown field's Warning
            head += "".join(f"{key}: {value}\r\n" for key, value in (headers or {}).items())
            head += "".join(
                'Warning: 299 - "' + w.replace('"', '\\"') + '"\r\n' for w in warnings or []
            )
        self.wfile.write((head + "\r\n").encode("latin-1") + data)
        return code

    def _record(self, status: int) -> None:
        """Log the current request once, before its response leaves (so readers never race)."""
        entry, self._entry = self._entry, None
        if entry is not None:
            entry["status"] = status
            self.server.log.append(entry)

    def _send_error(self, error: ApiError) -> int:
        return self._send(error.code, error.status(), error.headers)

    # -- dispatch --------------------------------------------------------------
    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True)) if url.query else {}
        body = self._body()
        if url.path.startswith(CONTROL_PREFIX):
            try:
                self._control(method, url.path[len(CONTROL_PREFIX) :], query, body)
            except (ApiError, ValueError, KeyError) as err:
                if isinstance(err, ApiError):
                    self._send_error(err)
                else:
                    self._send_error(errors.bad_request(str(err)))
            return
        route = route_of(method, url.path, query)
        self._entry = entry = routed_entry(method, url.path, query, route)
        try:
            content_type = self.headers.get("Content-Type", "")
            if body and content_type.startswith("application/vnd.kubernetes.protobuf"):
                # The real server decodes protobuf; the double answers as a server that
                # cannot, so that clients fall back to JSON (client-go does on a 415).
                self._send_error(errors.unsupported_media_type(["application/json"]))
                return
            if route is not None and route.verb:
                decision = self.server.faults.decide(route.verb, route.res.plural)
                if decision.delay_ms:
                    time.sleep(decision.delay_ms / 1000)
                if decision.hang:
                    entry.update(fault="hang", dropped=True)
                    self._record(0)
                    self.server.faults.hang()
                if decision.drop or decision.hang:
                    entry.update(fault=entry["fault"] or "drop", dropped=True)
                    self._record(0)
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if decision.lose:
                    self._lose(method, url.path, route, query, body)
                    return
                if decision.error is not None:
                    entry["fault"] = str(decision.error.code)
                    self._send_error(decision.error)
                    return
                if decision.ended and route.verb == "watch":
                    entry["fault"] = "ended"
                    self._record(200)
                    self.answer_ended_watch()
                    return
                if decision.list_body and route.verb == "list":
                    entry["fault"] = decision.list_body
                    self._record(faults_module.list_status(decision.list_body, query))
                    self.answer_list_fault(decision.list_body, query, self.server.faults.released())
                    return
            self._handle(method, url.path, route, query, body)
        except ApiError as err:
            self._send_error(err)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self._record(0)

    def _lose(
        self, method: str, path: str, route: Route, query: dict[str, str], body: bytes
    ) -> None:
        """Act on the request, then close the connection instead of answering."""
        assert self._entry is not None
        self._entry.update(fault="lose", dropped=True)
        answer, self.wfile = self.wfile, io.BytesIO()
        try:
            self._handle(method, path, route, query, body)
        except ApiError as err:
            self._send_error(err)
        finally:
            self.wfile = answer
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _handle(
        self, method: str, path: str, route: Route | None, query: dict[str, str], body: bytes
    ) -> int:
        if route is None:
            return self._discovery(method, path)
        if not route.verb:
            raise errors.method_not_allowed()
        rest, res, ns = self.server.rest, route.res, route.namespace
        validation = query.get("fieldValidation") or "Warn"
        dry_run = query.get("dryRun") == "All"
        if route.verb == "get" and route.subresource == "log":
            return self._send(200, self.server.pod_logs.read(rest, ns or "", route.name, query))
        if route.verb == "get":
            return self._send(200, rest.get(res, ns or "", route.name))
        if route.verb in ("list", "watch", "deletecollection"):
            labels = parse_label_selector(query.get("labelSelector", ""))
            fields = parse_field_selector(query.get("fieldSelector", ""))
            if route.verb == "list":
                limit, token = int(query.get("limit") or 0), query.get("continue", "")
                # `Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`
                # asks for each object's metadata alone (the first type offered is taken).
                accept = self.headers.get("Accept", "").split(",")[0].replace(" ", "")
                partial = "as=PartialObjectMetadataList" in accept.split(";")
                return self._send(
                    200, rest.list_json(res, ns, labels, fields, limit, token, partial)
                )
            if route.verb == "watch":
                return self._watch(res, ns, labels, fields, query)
            deleted, warnings = rest.delete_collection(
                res, ns, labels, fields, self._delete_options(body, query), dry_run
            )
            return self._send(200, deleted, warnings=warnings)
        assert ns is not None
        if route.verb == "create":
            obj, warnings = rest.create(res, ns, self._json(body), validation, dry_run)
            return self._send(201, obj, warnings=warnings)
        if route.verb == "update":
            obj, warnings, created = rest.update(
                res, ns, route.name, self._json(body), route.subresource, validation, dry_run
            )
            return self._send(201 if created else 200, obj, warnings=warnings)
        if route.verb == "patch":
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            obj, warnings = rest.patch(
                res, ns, route.name, content_type, body, route.subresource, validation, dry_run
            )
            return self._send(200, obj, warnings=warnings)
        obj, warnings = rest.delete(res, ns, route.name, self._delete_options(body, query), dry_run)
        return self._send(200, obj, warnings=warnings)

    @staticmethod
    def _json(body: bytes) -> Any:
        try:
            return json.loads(body)
        except ValueError as err:
            raise errors.bad_request(
                f"couldn't get version/kind; json parse error: {err}"
            ) from None

    def _delete_options(self, body: bytes, query: dict[str, str]) -> dict[str, Any]:
        options: dict[str, Any] = self._json(body) if body.strip() else {}
        if not isinstance(options, dict):
            raise errors.bad_request("DeleteOptions must be an object")
        if "propagationPolicy" in query:
            options["propagationPolicy"] = query["propagationPolicy"]
        if "orphanDependents" in query:
            options["orphanDependents"] = query["orphanDependents"] == "true"
        if "gracePeriodSeconds" in query:
            try:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            except ValueError:
                raise errors.bad_request("gracePeriodSeconds must be an integer") from None
        return options

    # -- discovery -------------------------------------------------------------
    def _discovery(self, method: str, path: str) -> int:
        if method != "GET":
            raise errors.path_not_found()
        path = path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        doc: Any = None
        if path == "/version":
            doc = discovery.VERSION
        elif path == "/api":
            doc = discovery.api_versions(self.headers.get("Host", ""))
        elif path == "/api/v1":
            doc = discovery.resource_list("v1")
        elif path == "/apis":
            doc = discovery.api_group_list()
        elif len(parts) == 2 and parts[0] == "apis":
            doc = discovery.api_group(parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            doc = discovery.resource_list(f"{parts[1]}/{parts[2]}")
        elif path == "/openapi/v3":
            doc = discovery.openapi_root()
        elif path.startswith("/openapi/v3/"):
            doc = discovery.openapi_document_for(path[len("/openapi/v3/") :])
        elif path in ("/healthz", "/readyz", "/livez"):
            return self._send(200, b"ok")
        elif len(parts) == 4 and parts[:3] == ["api", "v1", "namespaces"]:
            doc = self._namespace(parts[3])
        if doc is None:
            raise errors.path_not_found()
        return self._send(200, doc)

    def _namespace(self, name: str) -> dict[str, Any]:
        return {
            "kind": "Namespace",
            "apiVersion": "v1",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }

    # -- watch -----------------------------------------------------------------
    def _watch(
        self,
        res: Resource,
        namespace: str | None,
        labels: Any,
        fields: Any,
        query: dict[str, str],
    ) -> int:
        store = self.server.store
        timeout = query.get("timeoutSeconds")
        deadline = time.monotonic() + float(timeout) if timeout else None
        requested = query.get("resourceVersion", "")

        def matches(obj: dict[str, Any] | None) -> bool:
            return (
                obj is not None
                and match_labels(labels, obj["metadata"].get("labels"))
                and match_fields(fields, obj)
            )

        def same_scope(event: Event) -> bool:
            return event.res == res and (
                namespace is None or event.obj["metadata"].get("namespace") == namespace
            )

        frames: list[bytes] = []
        with store.lock:
            if requested in ("", "0"):
                cursor = store.rv
                frames = [
                    _watch_frame("ADDED", o) for o in store.objects(res, namespace) if matches(o)
                ]
            else:
                try:
                    cursor = int(requested)
                except ValueError:
                    raise errors.bad_request(f'invalid resource version "{requested}"') from None
                if cursor < store.compacted_rv:
                    expired = ApiError(
                        410,
                        "Expired",
                        f"too old resource version: {cursor} ({store.compacted_rv + 1})",
                    )
                    frames = [_watch_frame("ERROR", expired.status())]
                    deadline = time.monotonic()
        self._record(200)
        self.send_response(200)
        self.send_header("Content-Type", JSON)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while True:
                for frame in frames:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                self.wfile.flush()
                with store.changed:
                    events = store.events_after(cursor, same_scope)
                    while not events:
                        remaining = None if deadline is None else deadline - time.monotonic()
                        if store.closed or (remaining is not None and remaining <= 0):
                            break
                        store.changed.wait(timeout=min(remaining or 1.0, 1.0))
                        events = store.events_after(cursor, same_scope)
                    if not events:
                        break
                    cursor = events[-1].rv
                frames = []
                for event in events:
                    now_in, was_in = matches(event.obj), matches(event.prev)
                    kind = event.type
                    if kind == "MODIFIED" and now_in != was_in:
                        kind = "ADDED" if now_in else "DELETED"
                    elif kind == "DELETED":
                        now_in = was_in
                    if now_in or (kind == "DELETED" and was_in):
                        frames.append(_watch_frame(kind, event.obj))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
        return 200

    # -- control plane -----------------------------------------------------------
    def _control(self, method: str, path: str, query: dict[str, str], body: bytes) -> None:
        server, control = self.server, self.server.control
        data: dict[str, Any] = json.loads(body) if body.strip() else {}
        key = (method, path.rstrip("/"))
        if key == ("GET", "healthz"):
            self._send(200, b"ok")
        elif key == ("POST", "job-controller"):
            created = control.run_job_controller(data.get("namespace"))
            self._send(200, {"created": [p["metadata"]["name"] for p in created]})
        elif key == ("POST", "kubelet"):
            pods = control.kubelet(
                data.get("pod"),
                job=data.get("job"),
                namespace=data.get("namespace", "default"),
                phase=data.get("phase", "Running"),
                container=data.get("container"),
                exit_code=data.get("exitCode"),
                reason=data.get("reason"),
                message=data.get("message"),
                restart_state=data.get("restartState", "waiting"),
            )
            self._send(200, {"pods": [p["metadata"]["name"] for p in pods]})
        elif key == ("POST", "clock"):
            control.advance_clock(float(data.get("advanceSeconds", 0)))
            self._send(200, {"now": server.store.timestamp()})
        elif key == ("POST", "compact"):
            server.store.compact()
            self._send(200, {"compactedResourceVersion": str(server.store.compacted_rv)})
        elif key == ("GET", "faults"):
            faults = server.faults
            self._send(
                200, {"spec": faults.spec, "seed": faults.seed, "retryAfter": faults.retry_after}
            )
        elif key in (("PUT", "faults"), ("POST", "faults")):
            server.faults.configure(
                data.get("spec", ""), int(data.get("seed", 0)), int(data.get("retryAfter", 1))
            )
            self._send(200, {"spec": server.faults.spec})
        elif key == ("DELETE", "faults"):
            server.faults.configure("")
            self._send(200, {"spec": ""})
        elif key == ("GET", "requests"):
            self._send(200, server.log.snapshot())
        elif key == ("DELETE", "requests"):
            server.log.clear()
            self._send(200, [])
        elif method == "GET" and path.startswith("objects/"):
            res = resource(path.split("/", 1)[1])
            self._send(200, server.store.objects(res, query.get("namespace")))
        else:
            raise errors.path_not_found()
