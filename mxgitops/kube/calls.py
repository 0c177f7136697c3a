"""The request core of `cluster.Cluster`: one place where every request is made.

Each call is retried while its timeout allows (429s, 5xx and dropped connections, with
capped exponential backoff; Retry-After wins), bounded in time whatever the server
does, made as the tenant's service account where tenancy asks, and cut short once the
sync is stopping. A write is also cut short at the Lease's renew deadline
(`lease.Fence`): none is sent, or waited for, once another sync may hold the Lease;
the fence is looked at again right before a write goes out, once its credentials came
(a refresh of an exec plugin's token, which every writer and the Lease's renewal wait
for, may have taken past the deadline).
The read path (`kube/reads.py`) and the write path (`kube/writes.py`) are built on it;
`cluster.py` joins them and connects.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import quote, urlencode

from mxgitops.errors import ClusterClientError, ClusterUnreachable, LeaseLostError
from mxgitops.kube import transport
from mxgitops.kube.exchange import Response
from mxgitops.kube.lease import Fence
from mxgitops.kube.listing import LIST_PAGE_SIZE
from mxgitops.objects import Kind, KubeObject, ObjectRef

T = TypeVar("T")

# Writes in flight at once: what a first sync of many jobs waits on. 16 is far below what
# an API server serves at once by default (400 requests, 200 of them writes, shared out
# by API Priority and Fairness), and below Argo CD's 20 (--kubectl-parallelism-limit);
# at 8 a first sync of 300 jobs took 1.2 to 1.4 times as long (docs/guides/scale.md).
DEFAULT_PARALLELISM = 16
DEFAULT_REQUEST_TIMEOUT = 30.0  # seconds one API call may take, its retries included
MAX_REQUEST_TIMEOUT = 3600.0
STOP_GRACE = 2.0  # once stopping, a call (releasing the Lease) gets at most this long
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """Capped exponential backoff; Retry-After wins when the server sends one."""

    attempts: int = 6
    base_delay: float = 0.2
    max_delay: float = 5.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        backoff = min(self.max_delay, self.base_delay * 2**attempt)
        return min(self.max_delay, retry_after) if retry_after is not None else backoff


# Where each kind is served is the kind's own (`objects.Kind`: its group path and
# resource). Requests are plain JSON, not the client's typed models: those re-validate
# bodies and would reject quantities such as `nvidia.com/gpu: 8` that the API server accepts.


def path_of(kind: Kind, namespace: str | None = None, name: str | None = None) -> str:
    group, resource = kind.api, kind.resource
    path = f"{group}/namespaces/{namespace}/{resource}" if namespace else f"{group}/{resource}"
    return f"{path}/{name}" if name else path


def tenant_namespace(path: str) -> str | None:
    """The namespace of a request about one of a job's objects (the kinds marked
    `tenant`, whichever runtime defined them): what tenancy writes (and reads back) as
    the tenant; None for any other request."""
    for kind in Kind.known():
        if not kind.tenant:
            continue
        prefix = f"{kind.api}/namespaces/"
        if path.startswith(prefix):
            namespace, _, rest = path[len(prefix) :].partition("/")
            if namespace and (rest == kind.resource or rest.startswith(kind.resource + "/")):
                return namespace
    return None


@dataclass
class Calls:
    """A connection to one cluster, and the one place its requests are made."""

    # The name is older than the class: tests build a Cluster from it.
    api_client: transport.Transport
    parallelism: int = DEFAULT_PARALLELISM
    retry: RetryPolicy = RetryPolicy()
    sleep: Callable[[float], None] = time.sleep
    server: str = ""
    timeout: float = DEFAULT_REQUEST_TIMEOUT
    clock: Callable[[], float] = time.monotonic
    stopping: threading.Event = field(default_factory=threading.Event)
    # Tenancy: every request about a job's objects in namespace N is made as this service
    # account of N (impersonation), so N's RBAC and Pod Security admission decide.
    tenant_service_account: str = ""
    page_size: int = LIST_PAGE_SIZE
    # Set while the sync holds its Lease (`lease.held`): writes end at its renew deadline.
    fence: Fence = field(default_factory=Fence)

    def stop(self) -> None:
        """The sync is stopping (SIGTERM): start no further write, and give each call
        still to come (releasing the Lease) at most `STOP_GRACE` seconds."""
        self.stopping.set()

    def get(self, ref: ObjectRef) -> KubeObject | None:
        try:
            return self._request("GET", path_of(ref.kind, ref.namespace, ref.name))
        except ClusterClientError as exc:
            if exc.status == 404:
                return None
            raise

    # -- the one place requests are made ------------------------------------------

    def _request(self, method: str, path: str, body: KubeObject | None = None) -> KubeObject:
        return self._call(method, path, body=body, read=transport.read_object)

    def _call(
        self,
        method: str,
        path: str,
        *,
        read: Callable[[Response], T],
        query: dict[str, str] | None = None,
        body: KubeObject | None = None,
        warnings: list[str] | None = None,
        accept: str | None = None,
        content_type: str | None = None,
        budget: float | None = None,
    ) -> T:
        """What `read` makes of the response's body, the request retried while the
        call's timeout (or the `budget` left of a LIST's) allows; the texts of its
        `Warning` headers go to `warnings`."""
        budget = self.timeout if budget is None else budget
        budget = min(budget, STOP_GRACE) if self.stopping.is_set() else budget
        deadline = self.clock() + budget
        fenced = self._fence_deadline(method)
        # Built once for every attempt: the URL, the headers, the body encoded.
        url = f"{path}?{urlencode(query, quote_via=quote)}" if query else path
        data = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
        sent = {**transport.request_headers(method), **self._acting_as(path)}
        if accept is not None:
            sent["Accept"] = accept
        if content_type is not None:
            sent["Content-Type"] = content_type
        server = self.server or "the cluster"
        failure = f"no answer to {method} {path} by then"  # the last attempt's, in words

        def fence_check() -> None:
            """Checked again once the request is ready to go: getting its credentials
            may have taken past the renew deadline (another writer's refresh stalled)."""
            left = self.fence.left() if method != "GET" else None
            if left is not None and left <= 0:
                raise self._lease_lost(f"{method} {path} was ready only after the deadline")

        try:
            for attempt in range(self.retry.attempts):
                last = attempt == self.retry.attempts - 1
                remaining = min(deadline, fenced) - self.clock()
                if remaining <= 0 and fenced < deadline:
                    raise self._lease_lost(failure)
                try:
                    return self.api_client.request(
                        method,
                        url,
                        data,
                        sent,
                        timeout=remaining,
                        read=read,
                        warnings=warnings,
                        before_send=fence_check,
                    )
                except transport.Refused as exc:
                    delay = self.retry.delay(attempt, exc.retry_after)
                    retryable = exc.status in RETRYABLE_STATUS and not last
                    if not retryable or self._late(deadline, delay):
                        raise exc.as_error(method, path) from exc
                    failure = str(exc.as_error(method, path))
                except transport.Unanswered as exc:
                    if exc.timed_out and fenced < deadline and self.clock() >= fenced:
                        raise self._lease_lost(failure) from exc.error
                    if exc.timed_out:
                        raise ClusterUnreachable(
                            f"the Kubernetes API at {server} did not answer "
                            f"{method} {path} within {budget:g} s (--request-timeout)"
                        ) from exc.error
                    delay = self.retry.delay(attempt, None)
                    failure = f"cannot reach the Kubernetes API at {server}: {exc.cause()}"
                    # A certificate does not get better by retrying.
                    if exc.tls or last or self._late(deadline, delay):
                        raise ClusterUnreachable(failure) from exc.error
                self.sleep(delay)
        except (SystemExit, KeyboardInterrupt):
            self.stop()  # SIGTERM arrived during this call: what follows gets the grace
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _fence_deadline(self, method: str) -> float:
        """When a write must have ended (`self.clock()`'s time): the Lease's renew
        deadline, while a Lease is held; no limit for a read."""
        left = self.fence.left() if method != "GET" else None
        return math.inf if left is None else self.clock() + left

    def _lease_lost(self, failure: str) -> LeaseLostError:
        """Past the renew deadline: this sync stops (`stop`), and says why (the renewal's
        failure, else this write's)."""
        self.stop()
        self.fence.why = self.fence.why or failure
        return self.fence.lost()

    def _late(self, deadline: float, delay: float) -> bool:
        """Whether a retry after `delay` would start too late to be answered in time."""
        return self.clock() + delay >= deadline

    def _acting_as(self, path: str) -> dict[str, str]:
        """The impersonation header of a request about a job's objects (of the kinds
        marked `tenant`: a batch Job, Service, pod and its log, a runtime's own) in a
        namespace, under tenancy; none for the cluster-wide LISTs, the Lease and ledger."""
        namespace = tenant_namespace(path)
        if not self.tenant_service_account or namespace is None:
            return {}
        return {
            "Impersonate-User": f"system:serviceaccount:{namespace}:{self.tenant_service_account}"
        }
