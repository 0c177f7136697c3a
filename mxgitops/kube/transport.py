"""HTTP to one Kubernetes API server: the connection, the credentials, one request.

`cluster.py` decides which requests to make, retries them and keeps them within
their deadline; this module makes one of them and says how it went. It promises:

- one urllib3 connection pool per server, built once from the official client's
  loaded `Configuration` by the client's own code, so TLS, proxies and pool size
  are what kubectl would use; the client's request path is not used: serialising
  each body through its models and re-reading the proxy environment cost more
  client CPU per write than the request itself, under the GIL all writers share;
- on a direct connection (no proxy), urllib3 makes the connection (socket, TLS),
  each request goes out in one write and its answer is parsed by httptools' C
  parser, for less CPU than urllib3's pool takes (docs/development: measurements);
  through a proxy, urllib3 does all;
- the Authorization header asked of the configuration at each request, so an
  expiring token is renewed (one renewal at a time, however many writers);
- a 2xx answer becomes what the caller's `read` makes of its body, read as it
  arrives; the texts of its `Warning` headers go to the caller's list;
- an answer other than 2xx is `Refused`, its body read and `Retry-After` parsed,
  and `Refused.as_error` maps it to `errors.py` (401/403 forbidden, 429 and 5xx
  a server error, any other a client error with the Status' reason); no answer
  at all is `Unanswered`, which says whether it timed out, failed in the TLS
  handshake, or what else went wrong, in words;
- a connection is used again only when the answer was read to its end.

urllib3, httptools (`kube/connections.py`) and the official client are imported when a
`Transport` is built or used, not with this module: commands that need no cluster
never load them.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from mxgitops.errors import ClusterClientError, ClusterError, ClusterForbidden, ClusterServerError
from mxgitops.kube.exchange import Response, Way
from mxgitops.objects import KubeObject

T = TypeVar("T")

CONNECT_TIMEOUT = 10.0  # seconds, of each attempt, within the call's timeout

_JSON = "application/json"
_CONTENT_TYPES = {
    "POST": _JSON,
    "PUT": _JSON,
    "DELETE": _JSON,  # its body: the DeleteOptions
    "PATCH": "application/merge-patch+json",
}


def request_headers(method: str) -> dict[str, str]:
    """The headers of every request of `method` (a fresh dict, the caller's to add to)."""
    return {
        "Accept": f"{_JSON}, */*",  # a pod's log is text
        "User-Agent": "mxgitops",
        **({"Content-Type": _CONTENT_TYPES[method]} if method in _CONTENT_TYPES else {}),
    }


class Transport:
    """Requests to one API server. Connections are made by urllib3, from a pool built
    once from the official client's loaded `Configuration` by the client's own code
    (CA or insecure-skip-tls-verify, client certificate and key, tls-server-name,
    proxy-url or the proxy environment and its no_proxy, pool size). The
    Authorization header is asked of the configuration at each request: its refresh
    hook renews an exec plugin's token, or re-reads the pod's service-account token,
    once it expires."""

    def __init__(self, configuration: Any) -> None:
        import urllib3
        from kubernetes.client.rest import RESTClientObject

        from mxgitops.kube.connections import UNANSWERED, Direct, ThroughProxy

        self.configuration = configuration
        # The refresh hook of a kubeconfig's token sets the configuration's host again at
        # each request, and a host set re-reads the proxy environment unless the proxy is
        # pinned: pinned here, to the one the pool was built with, so no write re-reads it.
        configuration.proxy = configuration.proxy
        host = str(configuration.host).rstrip("/")
        manager = RESTClientObject(configuration).pool_manager
        self.way: Way
        if isinstance(manager, urllib3.ProxyManager):  # wants whole URLs, adds its headers
            self.way = ThroughProxy(manager, host)
        else:
            pool = manager.connection_from_url(host)
            prefix = urllib3.util.parse_url(host).path or ""  # a server under a path
            self.way = Direct(pool, prefix, keep=int(configuration.connection_pool_maxsize))
        self._unanswered = UNANSWERED
        self._refreshing = threading.Lock()

    def authorization(self) -> str | None:
        """The header's value (`Bearer <token>`, or Basic), renewed when it expires; one
        writer renews it while the others wait, so an exec plugin runs once."""
        with self._refreshing:
            value = self.configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
        return str(value) if value else None

    def request(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: dict[str, str],
        *,
        timeout: float,
        read: Callable[[Response], T],
        warnings: list[str] | None = None,
        before_send: Callable[[], None] = lambda: None,
    ) -> T:
        """What `read` makes of a 2xx response, within `timeout` seconds: the
        credentials, connecting, sending and the whole answer, however slowly it comes
        (a LIST body that never ends is no answer: `Unanswered`, timed out). Raises
        `Refused` for any other answer, `Unanswered` for none, and a `ClusterError` for
        a body `read` cannot read. `before_send` is called once the request is ready to
        go (its credentials obtained, its connection made), right before it is sent:
        what it raises, the request is not sent."""
        deadline = time.monotonic() + max(0.001, timeout)
        token = self.authorization()  # may wait for another writer's refresh
        if token:
            headers = {**headers, "Authorization": token}
        # Connect and read timeouts: a read timeout bounds each wait for data, the
        # deadline the whole answer.
        left = max(0.001, deadline - time.monotonic())
        timeouts = (min(CONNECT_TIMEOUT, left), left)
        exchange = self.way.exchange(method, url, body, headers, timeouts, deadline, before_send)
        try:
            with exchange as response:
                if not 200 <= response.status <= 299:
                    raise Refused(response)  # its body read whole: the connection is reusable
                if warnings is not None:
                    warnings += _warnings(response.headers)
                try:
                    return read(response)
                except ValueError as exc:  # a body that is not the JSON it should be
                    raise ClusterError(
                        f"the Kubernetes API answered {method} {url.split('?')[0]} with a "
                        f"body that cannot be read: {_short(exc)}"
                    ) from exc
        except self._unanswered as exc:
            raise Unanswered(exc) from exc


def read_object(response: Response) -> KubeObject:
    """The response's body, a JSON object (an empty body: an empty object)."""
    result: KubeObject = json.loads(response.read() or b"{}")
    return result


def read_bytes(response: Response) -> bytes:
    """The response's body, as it came."""
    return response.read()


class Refused(Exception):
    """An answer other than 2xx, its body read."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status)
        self.status = response.status
        self.reason = response.reason or ""
        self.body = response.read()
        value = response.headers.get("Retry-After")
        try:
            self.retry_after = float(value) if value is not None else None
        except ValueError:
            self.retry_after = None

    def as_error(self, method: str, path: str) -> ClusterError:
        """The error of this answer: the Status body's message and reason."""
        status, body = self.status, _status_body(self.body)
        message = str(body.get("message") or self.reason or "request failed")
        reason = str(body.get("reason") or "")
        what = f"{method} {path}"
        if status in (401, 403):
            return ClusterForbidden(f"the Kubernetes API refused {what}: {message}")
        if status >= 500 or status == 429:
            return ClusterServerError(f"the Kubernetes API failed {what}: {message}", status=status)
        return ClusterClientError(message, status=status, reason=reason)


class Unanswered(Exception):
    """No answer: the connection failed, or the server stopped answering. `error` is
    urllib3's (or the socket's) exception."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error
        self.timed_out = _timed_out(error)
        self.tls = _tls_failure(error)  # "" unless the TLS handshake failed

    def cause(self) -> str:
        """What went wrong, in words, not urllib3's repr of the exception chain."""
        if self.tls:
            return self.tls
        text = str(getattr(self.error, "reason", None) or self.error)
        return next((said for pattern, said in _CAUSES if pattern.search(text)), _short(self.error))


_CAUSES = (
    (re.compile(r"Connection refused", re.IGNORECASE), "connection refused"),
    (re.compile(r"not known|nodename nor servname|name resolution"), "unknown host"),
    (re.compile(r"No route to host|Network is unreachable"), "no route to the host"),
    (
        re.compile(r"Connection reset|Connection aborted|RemoteDisconnected|closed connection"),
        "connection reset",
    ),
)


def _timed_out(exc: BaseException) -> bool:
    """A connect or read timeout, bare or as the reason urllib3 gave up (a refused
    connection is a NewConnectionError, which urllib3 derives from its timeouts)."""
    import urllib3

    for error in (exc, getattr(exc, "reason", None)):
        if isinstance(error, urllib3.exceptions.NewConnectionError):
            return False
        if isinstance(error, TimeoutError | urllib3.exceptions.TimeoutError):
            return True
    return False


def _tls_failure(exc: BaseException) -> str:
    """`TLS: <why>` when the connection failed in the TLS handshake, else ""."""
    import ssl

    import urllib3

    # The handshake's own error (a direct connection), or the reason urllib3 gave up.
    tls = urllib3.exceptions.SSLError | ssl.SSLError
    failed = next((e for e in (exc, getattr(exc, "reason", None)) if isinstance(e, tls)), None)
    if failed is None:
        return ""
    found = re.search(r"\[SSL: [A-Z_]+\] ([^()']+)", str(failed))
    return f"TLS: {(found.group(1) if found else _short(failed)).strip()}"


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def _status_body(body: bytes) -> dict[str, Any]:
    try:
        status = json.loads(body or b"{}")
    except ValueError:
        return {}
    return status if isinstance(status, dict) else {}


# One warning of a `Warning` header (RFC 7234: `299 - "text"`, the text a quoted string);
# several in one header are separated by commas.
_WARNING = re.compile(r'\d{3} \S+ "((?:[^"\\]|\\.)*)"')


def _warnings(headers: Any) -> list[str]:
    """The texts of a response's `Warning` headers, as the API server wrote them."""
    values = headers.getlist("Warning")  # urllib3's HTTPHeaderDict, either way
    return [re.sub(r"\\(.)", r"\1", text) for value in values for text in _WARNING.findall(value)]
