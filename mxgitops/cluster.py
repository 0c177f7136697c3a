"""The only module that talks to the Kubernetes API.

It speaks plain JSON objects (`objects.KubeObject`), so the rest of mxgitops never
sees a client model or an HTTP library. The official client loads the
configuration (kubeconfig contexts, exec plugins, client certificates, token
files, the pod's service account); `kubehttp` sends each request over the one
connection pool the client builds from it; `listdecode` reads each LIST page as
it arrives. Which requests are made, their retries and deadlines, and tenancy
are decided here. What it promises the planner and apply:

- live state costs one LIST per kind, across namespaces, filtered by the
  ownership selector, read in pages of `LIST_PAGE_SIZE` objects (`limit` and
  `continue`); each page is decoded as it arrives, one item at a time, and each
  item trimmed to what planning reads before the next is decoded, so memory
  grows with the objects kept, never with a page's body; a LIST is bounded in
  pages, items, restarts and time, whatever the server sends (`listing.py`);
- writes run with bounded parallelism and are idempotent: AlreadyExists on
  create and NotFound on delete count as success, so a retried write (after a
  429, a 5xx or a dropped connection) never duplicates anything, and no GET is
  needed before a create;
- every failure becomes an `errors.ClusterError` with the cause chained;
- no call takes longer than its timeout, retries included: an API server that
  accepts connections but never answers is unreachable (exit 4), not a hang;
- under tenancy (`tenant_service_account`), a request about a job's objects in
  namespace N is made as that service account of N (`Impersonate-User`): N's
  RBAC and Pod Security admission judge it, and a refusal is that job's error;
- once `stop()` is called (SIGTERM), no further write starts and what is left
  (releasing the Lease) gets a short deadline; writes run on daemon threads, so
  a write in flight never keeps the process from exiting.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote, urlencode

import yaml

from mxgitops import kubehttp
from mxgitops.errors import ClusterClientError, ClusterError, ClusterUnreachable, ConfigError
from mxgitops.errors import ClusterServerError as ClusterServerError  # callers catch it here
from mxgitops.kubeconfig import NoClusterConfigured, cluster_configured, load_configuration
from mxgitops.listing import (
    LIST_PAGE_SIZE,
    LIST_READ_SIZE,
    LIST_RESTARTS,
    METADATA_ONLY,
    Progress,
    Trim,
    page_reader,
)
from mxgitops.objects import (
    Create,
    Delete,
    Kind,
    KubeObject,
    LiveObjects,
    ObjectRef,
    Patch,
    Write,
    WriteResult,
    same_owner,
)

T = TypeVar("T")

DEFAULT_PARALLELISM = 8
DEFAULT_REQUEST_TIMEOUT = 30.0  # seconds one API call may take, its retries included
MAX_REQUEST_TIMEOUT = 3600.0
STOP_GRACE = 2.0  # once stopping, a call (releasing the Lease) gets at most this long
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
# Where they were defined before listing.py: callers and tests read them here.
__all__ = [
    "LIST_PAGE_SIZE",
    "LIST_READ_SIZE",
    "LIST_RESTARTS",
    "METADATA_ONLY",
    "NoClusterConfigured",
    "cluster_configured",
]


@dataclass(frozen=True)
class RetryPolicy:
    """Capped exponential backoff; Retry-After wins when the server sends one."""

    attempts: int = 6
    base_delay: float = 0.2
    max_delay: float = 5.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        backoff = min(self.max_delay, self.base_delay * 2**attempt)
        return min(self.max_delay, retry_after) if retry_after is not None else backoff


# kind -> (API group path, resource). Requests are plain JSON, not the client's typed
# models: those re-validate bodies and would reject quantities such as
# `nvidia.com/gpu: 8` that the API server accepts.
_RESOURCES: dict[Kind, tuple[str, str]] = {
    Kind.JOB: ("/apis/batch/v1", "jobs"),
    Kind.SERVICE: ("/api/v1", "services"),
    Kind.POD: ("/api/v1", "pods"),
    Kind.CONFIG_MAP: ("/api/v1", "configmaps"),
    Kind.LEASE: ("/apis/coordination.k8s.io/v1", "leases"),
    Kind.EVENT: ("/apis/events.k8s.io/v1", "events"),
    Kind.JOBSET: ("/apis/jobset.x-k8s.io/v1alpha2", "jobsets"),
    Kind.WORKLOAD: ("/apis/kueue.x-k8s.io/v1beta2", "workloads"),
    Kind.WORKLOAD_PRIORITY_CLASS: ("/apis/kueue.x-k8s.io/v1beta2", "workloadpriorityclasses"),
}
# The label Kueue reads a job's queue from (`scheduling.QUEUE_LABEL`): a JobSet with it
# has a Workload, which says why it waits.
_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
_GONE_POLL = 0.5  # seconds between reads of objects being deleted
# A kind's apiVersion: its group path without the leading /api/ or /apis/.
_API_VERSIONS = {kind: group.split("/", 2)[2] for kind, (group, _) in _RESOURCES.items()}


# What planning (trainer.live, trainer.status, trainer.inplace) never reads of a live
# object: a batch Job's pod template (its run-policy fields, metadata and status are
# read), a pod's containers and volumes (its metadata and status are). Most of each
# object's size. Of a Service it reads the metadata alone: those are listed so.
_LIVE_UNREAD: dict[Kind, tuple[tuple[str, str], ...]] = {
    Kind.JOB: (("spec", "template"),),
    Kind.POD: (("spec", "containers"), ("spec", "volumes"), ("spec", "initContainers")),
    # Its replicatedJobs (pod templates, where Kueue injects what it admits with) are
    # never read: its in-place fields, metadata and status are.
    Kind.JOBSET: (("spec", "replicatedJobs"),),
    Kind.WORKLOAD: (("spec", "podSets"),),
}


def _path(kind: Kind, namespace: str | None = None, name: str | None = None) -> str:
    group, resource = _RESOURCES[kind]
    path = f"{group}/namespaces/{namespace}/{resource}" if namespace else f"{group}/{resource}"
    return f"{path}/{name}" if name else path


@dataclass
class Cluster:
    """A connection to one cluster; cheap to share between threads."""

    # The name is older than the class: tests build a Cluster from it.
    api_client: kubehttp.Transport
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

    def stop(self) -> None:
        """The sync is stopping (SIGTERM): start no further write, and give each call
        still to come (releasing the Lease) at most `STOP_GRACE` seconds."""
        self.stopping.set()

    # -- reads ----------------------------------------------------------------

    def list_live(self, selector: str) -> LiveObjects:
        """One LIST per kind, across namespaces, of the objects matching `selector`,
        each kept with what planning reads of it (`_LIVE_UNREAD`): memory grows with
        the number of jobs, not with the size of their pod templates."""
        jobs = tuple(self.list_all(Kind.JOB, selector, unread=_LIVE_UNREAD[Kind.JOB]))
        services = tuple(self.list_all(Kind.SERVICE, selector, metadata_only=True))
        pods = tuple(self.list_all(Kind.POD, selector, unread=_LIVE_UNREAD[Kind.POD]))
        jobsets = tuple(self._list_if_served(Kind.JOBSET, selector))
        queued = any(_QUEUE_LABEL in (o["metadata"].get("labels") or {}) for o in jobsets)
        return LiveObjects(
            jobs=jobs,
            services=services,
            pods=pods,
            jobsets=jobsets,
            # Kueue labels no Workload with ours: all of them, and only when one is needed.
            workloads=tuple(self._list_if_served(Kind.WORKLOAD, "")) if queued else (),
        )

    def workload_priority_classes(self) -> frozenset[str]:
        """The names of Kueue's WorkloadPriorityClasses (none where Kueue is not served)."""
        found = self._list_if_served(Kind.WORKLOAD_PRIORITY_CLASS, "")
        return frozenset(str(o["metadata"]["name"]) for o in found)

    def _list_if_served(self, kind: Kind, selector: str) -> list[KubeObject]:
        """A LIST of a custom resource; none when the cluster does not serve it (404: its
        CRD is not installed, so no object of that kind can exist)."""
        try:
            return self.list_all(kind, selector, unread=_LIVE_UNREAD.get(kind, ()))
        except ClusterClientError as exc:
            if exc.status == 404:
                return []
            raise

    def list_all(
        self,
        kind: Kind,
        selector: str,
        namespace: str | None = None,
        *,
        unread: Trim = (),
        metadata_only: bool = False,
    ) -> list[KubeObject]:
        """One LIST of the objects matching `selector`, in `namespace` or in all, page by
        page. A page's items are kept without their managedFields (nothing reads them,
        and they are a good part of each object), nor the `unread` (section, field)
        pairs; with `metadata_only`, each is its metadata alone (kind and apiVersion
        still those of `kind`). A continuation the server no longer has (410 Expired:
        the first page is older than its compaction) starts over, a few times; the
        LIST's pages and time are bounded (`listing.Progress`)."""
        path = _path(kind, namespace)
        query = {"labelSelector": selector, "limit": str(self.page_size)}
        progress = Progress(path, self.clock, self.timeout)
        items: list[KubeObject] = []
        while True:
            budget = progress.budget(self.timeout)
            try:
                page, more = self._page(kind, path, query, unread, metadata_only, budget)
            except ClusterClientError as exc:
                if exc.status != 410 or "continue" not in query:
                    raise
                progress.restart()
                query, items = {k: v for k, v in query.items() if k != "continue"}, []
                continue
            items += page
            if not more:
                return items
            progress.next_page(more)
            query = {**query, "continue": more}

    def _page(
        self,
        kind: Kind,
        path: str,
        query: dict[str, str],
        unread: Trim,
        metadata_only: bool = False,
        budget: float | None = None,
    ) -> tuple[list[KubeObject], str]:
        """One page of a LIST, decoded as it is read, and its `continue` token ("" if it
        is the last); each item is trimmed before the next is decoded."""
        limit = int(query["limit"])
        read = page_reader(kind, limit, unread, metadata_only, _API_VERSIONS[kind])
        accept = METADATA_ONLY if metadata_only else None
        return self._call("GET", path, query=query, read=read, accept=accept, budget=budget)

    def pod_log(
        self, namespace: str, pod: str, *, container: str, tail_lines: int, limit_bytes: int
    ) -> str:
        """The last `tail_lines` lines of a container's log, at most `limit_bytes` read."""
        query = {
            "container": container,
            "tailLines": str(tail_lines),
            "limitBytes": str(limit_bytes),
        }
        path = f"{_path(Kind.POD, namespace, pod)}/log"
        log = self._call("GET", path, query=query, read=kubehttp.read_bytes)
        return log.decode("utf-8", "replace")

    def wait_gone(
        self, refs: Sequence[ObjectRef], *, timeout: float, tick: Callable[[], None]
    ) -> list[ObjectRef]:
        """Those of `refs` still there after up to `timeout` seconds; each is read until
        the API server answers 404 (an object deleted in the foreground is there until
        its dependents are gone)."""
        deadline = time.monotonic() + timeout
        left = list(refs)
        while True:
            left = [ref for ref in left if self.get(ref) is not None]
            if not left or time.monotonic() >= deadline:
                return left
            tick()
            time.sleep(_GONE_POLL)

    def get(self, ref: ObjectRef) -> KubeObject | None:
        try:
            return self._request("GET", _path(ref.kind, ref.namespace, ref.name))
        except ClusterClientError as exc:
            if exc.status == 404:
                return None
            raise

    # -- single writes that must not be blind (ledger, lease) --------------------

    def create_strict(self, obj: KubeObject) -> KubeObject:
        """Create, failing with a 409 ClusterClientError if the object exists."""
        ref = ObjectRef.of(obj)
        return self._request("POST", _path(ref.kind, ref.namespace), body=obj)

    def replace(self, obj: KubeObject) -> KubeObject:
        """Replace, failing with a 409 ClusterClientError on a stale resourceVersion."""
        ref = ObjectRef.of(obj)
        return self._request("PUT", _path(ref.kind, ref.namespace, ref.name), body=obj)

    # -- idempotent bulk writes ---------------------------------------------------

    def write(
        self, writes: Sequence[Write], on_done: Callable[[WriteResult], None] | None = None
    ) -> list[WriteResult]:
        """Run writes with bounded parallelism; one result per write, in order.

        The writers are daemon threads that take the next write only while the
        cluster is not stopping. The caller waits for them in `join`, which a
        signal interrupts: a SIGTERM then stops the sync at once, and a write in
        flight finishes (or times out) on its own without holding the exit up.
        """
        results: list[WriteResult | None] = [None] * len(writes)
        pending = iter(range(len(writes)))
        claim = threading.Lock()
        crashes: list[BaseException] = []

        def writer() -> None:
            while not self.stopping.is_set():
                with claim:
                    index = next(pending, None)
                if index is None:
                    return
                try:
                    results[index] = result = self._write_one(writes[index])
                    if on_done is not None:
                        on_done(result)
                except Exception as exc:  # a bug: raised again in the caller's thread
                    crashes.append(exc)
                    return

        workers = [
            threading.Thread(target=writer, name=f"mxgitops-write-{n}", daemon=True)
            for n in range(min(self.parallelism, len(writes)))
        ]
        try:
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        except BaseException:
            self.stop()
            raise
        if crashes:
            raise crashes[0]
        return [
            r if r is not None else WriteResult(w, _stopped())
            for r, w in zip(results, writes, strict=True)
        ]

    def create(self, objects: Sequence[KubeObject]) -> None:
        _raise_first(self.write([Create(o) for o in objects]))

    def delete(self, refs: Sequence[ObjectRef]) -> None:
        _raise_first(self.write([Delete(r) for r in refs]))

    def _write_one(self, write: Write) -> WriteResult:
        said: list[str] = []  # the response's Warning headers (e.g. PodSecurity's)
        ref = write.ref
        try:
            # The object the server answers with is read, not decoded: nothing uses it.
            if isinstance(write, Create):
                path, method, body = _path(ref.kind, ref.namespace), "POST", write.obj
            elif isinstance(write, Patch):
                path, method, body = _path(ref.kind, ref.namespace, ref.name), "PATCH", write.body
            else:
                # Background: the Job goes at once, the garbage collector takes its pods.
                # Foreground: the Job stays, being deleted, until its pods are gone.
                path, method = _path(ref.kind, ref.namespace, ref.name), "DELETE"
                policy = "Foreground" if write.foreground else "Background"
                body = {"propagationPolicy": policy}
            self._call(method, path, body=body, warnings=said, read=kubehttp.read_bytes)
        except ClusterClientError as exc:
            if isinstance(write, Delete) and exc.status == 404:
                return WriteResult(write)
            if isinstance(write, Create) and exc.reason == "AlreadyExists":
                if ref.kind is Kind.EVENT:
                    # An Event's name is a digest of what it says: that was said. (No GET:
                    # mxgitops may only create events.)
                    return WriteResult(write)
                return self._created_before(write)
            return WriteResult(write, exc)
        except ClusterError as exc:
            return WriteResult(write, exc)
        return WriteResult(write, warnings=tuple(said))

    def _created_before(self, write: Create) -> WriteResult:
        """AlreadyExists is success when the object is ours (a retried create); an
        object of the same name that another owner made is never taken over."""
        try:
            existing = self.get(write.ref)
        except ClusterError as exc:
            return WriteResult(write, exc)
        if existing is None or same_owner(existing, write.obj):
            return WriteResult(write)
        return WriteResult(
            write,
            ClusterClientError(
                f"{write.ref} already exists and is not managed by this mxgitops instance; "
                "mxgitops leaves it alone",
                status=409,
                reason="AlreadyExists",
            ),
        )

    # -- the one place requests are made ------------------------------------------

    def _request(self, method: str, path: str, body: KubeObject | None = None) -> KubeObject:
        return self._call(method, path, body=body, read=kubehttp.read_object)

    def _call(
        self,
        method: str,
        path: str,
        *,
        read: Callable[[kubehttp.Response], T],
        query: dict[str, str] | None = None,
        body: KubeObject | None = None,
        warnings: list[str] | None = None,
        accept: str | None = None,
        budget: float | None = None,
    ) -> T:
        """What `read` makes of the response's body, the request retried while the
        call's timeout (or the `budget` left of a LIST's) allows; the texts of its
        `Warning` headers go to `warnings`."""
        budget = self.timeout if budget is None else budget
        budget = min(budget, STOP_GRACE) if self.stopping.is_set() else budget
        deadline = self.clock() + budget
        # Built once for every attempt: the URL, the headers, the body encoded.
        url = f"{path}?{urlencode(query, quote_via=quote)}" if query else path
        data = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
        sent = {**kubehttp.request_headers(method), **self._acting_as(path)}
        if accept is not None:
            sent["Accept"] = accept
        server = self.server or "the cluster"
        try:
            for attempt in range(self.retry.attempts):
                last = attempt == self.retry.attempts - 1
                remaining = deadline - self.clock()
                try:
                    return self.api_client.request(
                        method, url, data, sent, timeout=remaining, read=read, warnings=warnings
                    )
                except kubehttp.Refused as exc:
                    delay = self.retry.delay(attempt, exc.retry_after)
                    retryable = exc.status in RETRYABLE_STATUS and not last
                    if not retryable or self._late(deadline, delay):
                        raise exc.as_error(method, path) from exc
                except kubehttp.Unanswered as exc:
                    if exc.timed_out:
                        raise ClusterUnreachable(
                            f"the Kubernetes API at {server} did not answer "
                            f"{method} {path} within {budget:g} s (--request-timeout)"
                        ) from exc.error
                    delay = self.retry.delay(attempt, None)
                    # A certificate does not get better by retrying.
                    if exc.tls or last or self._late(deadline, delay):
                        raise ClusterUnreachable(
                            f"cannot reach the Kubernetes API at {server}: {exc.cause()}"
                        ) from exc.error
                self.sleep(delay)
        except (SystemExit, KeyboardInterrupt):
            self.stop()  # SIGTERM arrived during this call: what follows gets the grace
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _late(self, deadline: float, delay: float) -> bool:
        """Whether a retry after `delay` would start too late to be answered in time."""
        return self.clock() + delay >= deadline

    def _acting_as(self, path: str) -> dict[str, str]:
        """The impersonation header of a request about a batch Job, Service or pod (its
        log) in a namespace, under tenancy; none for the cluster-wide LISTs, the Lease
        and ledger."""
        match = _TENANT_PATH.match(path)
        if not self.tenant_service_account or match is None:
            return {}
        namespace = match.group(1)
        return {
            "Impersonate-User": f"system:serviceaccount:{namespace}:{self.tenant_service_account}"
        }


# The objects a job is made of, namespaced: what tenancy writes (and reads back) as the tenant.
_TENANT_PATH = re.compile(
    r"^(?:/apis/batch/v1|/api/v1|/apis/jobset\.x-k8s\.io/v1alpha2)/namespaces/([^/]+)"
    r"/(?:jobs|services|pods|jobsets)(?:/|$)"
)


def connect(
    *,
    kubeconfig: Path | None = None,
    context: str | None = None,
    parallelism: int = DEFAULT_PARALLELISM,
    retry: RetryPolicy | None = None,
    sleep: Callable[[float], None] | None = None,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    tenant_service_account: str | None = None,
) -> Cluster:
    """Connect like any Kubernetes tool: a kubeconfig (this one, else $KUBECONFIG or
    ~/.kube/config) with its current or the given context, else the pod's service
    account when running in a cluster.

    The official client is imported here, not with this module: it takes most of a
    second, and validate, convert and a dry run without a cluster never need it."""
    import kubernetes

    configuration = kubernetes.client.Configuration()
    try:
        source = load_configuration(configuration, kubeconfig, context)
    except (kubernetes.config.ConfigException, yaml.YAMLError, OSError, ValueError) as exc:
        # A kubeconfig that is not YAML, or not readable, is the user's to fix: no traceback.
        detail = " ".join(str(exc).split())
        raise ConfigError(f"cannot load the cluster configuration: {detail}") from exc
    if source is None:
        raise NoClusterConfigured(
            "no cluster configured: pass --kubeconfig, set KUBECONFIG, or run in a pod "
            "with a service account"
        )
    configuration.retries = 0  # retries are ours: idempotent and aware of Retry-After
    # A connection per writer, and one for the main thread (the Lease, the LISTs).
    configuration.connection_pool_maxsize = max(parallelism + 1, 4)
    return Cluster(
        api_client=kubehttp.Transport(configuration),
        parallelism=parallelism,
        retry=retry or RetryPolicy(),
        sleep=sleep or time.sleep,
        server=configuration.host,
        timeout=request_timeout,
        tenant_service_account=tenant_service_account or "",
    )


def _raise_first(results: list[WriteResult]) -> None:
    for result in results:
        if result.error is not None:
            raise result.error


def _stopped() -> ClusterError:
    return ClusterError("not sent: the sync was stopping")
