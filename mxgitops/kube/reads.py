"""The read path of `cluster.Cluster`: live state in one LIST per kind, and what else
a sync reads (a container's log tail, objects being deleted, the names of a runtime's
cluster-scoped objects).

Each LIST is across namespaces, filtered by the ownership selector (those of batch
Jobs, Services and pods made at once, `at_once`), read in pages of
`LIST_PAGE_SIZE` objects (`limit` and `continue`); each page is decoded as it arrives,
one item at a time, and each item trimmed to what planning reads before the next is
decoded, so memory grows with the objects kept, never with a page's body; a LIST is
bounded in pages, items, restarts and time, whatever the server sends (`listing.py`).
A kind the caller knows to hold no object of ours (`LiveObjects.unlisted`: the ledger
says so, `registry.unlisted`) is not listed at all. The Events of a pod a disruption
took away are read only while its batch Job's condition names it and it is gone, or,
for an `OnFailure` batch Job that counted a failed pod it no longer has (nothing names
that pod), those of each reason that says so in its namespace.
What the cluster says in a status or an Event is kept on one line and bounded as it is
read (`clustertext`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

from mxgitops.errors import ClusterClientError, ClusterForbidden
from mxgitops.kube import transport
from mxgitops.kube.calls import Calls, path_of
from mxgitops.kube.clustertext import said_within
from mxgitops.kube.listing import METADATA_ONLY, Progress, Trim, page_reader
from mxgitops.objects import Kind, KubeObject, Listing, LiveObjects, ObjectRef
from mxgitops.runtimes import registry
from mxgitops.runtimes.shared.disruption import EVENT_REASONS, counted_and_gone, departed_pod

# The annotation that makes a StorageClass the default, and its beta spelling, which
# Kubernetes still honours.
DEFAULT_STORAGE_CLASS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)
log = logging.getLogger("mxgitops")
GONE_POLL = 0.5  # seconds between reads of objects being deleted
EVENT_PAGE = 500  # Events read of one reason in one namespace: an hour's worth, at most


def at_once(*calls: Callable[[], list[KubeObject]]) -> list[list[KubeObject]]:
    """What each of `calls` returns, in order, the calls made at once: the server's
    time producing one LIST, and the wire's, is spent while this process decodes
    another's page (a decoder holds the interpreter only while it decodes). The first
    call runs in the caller's thread, so what it raises (a SIGTERM's exit too) is
    raised at once; the others run on daemon threads, which never hold the exit up.
    Raised otherwise is the error of the first of the others, in order, that failed."""
    results: list[list[KubeObject]] = [[] for _ in calls]
    errors: list[BaseException | None] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            results[index] = calls[index]()
        except BaseException as exc:  # raised again in the caller's thread, below
            errors[index] = exc

    others = [
        threading.Thread(target=run, args=(n,), name=f"mxgitops-list-{n}", daemon=True)
        for n in range(1, len(calls))
    ]
    for other in others:
        other.start()
    results[0] = calls[0]()
    for other in others:
        other.join()
    failed = next((error for error in errors if error is not None), None)
    if failed is not None:
        raise failed
    return results


def _involved(event: KubeObject) -> str:
    return str((event.get("involvedObject") or {}).get("name") or "")


class Reads(Calls):
    """What a sync reads of the cluster."""

    def list_live(
        self,
        selector: str,
        unlisted: Collection[Kind] = frozenset(),
        listings: Sequence[Listing] | None = None,
    ) -> LiveObjects:
        """One LIST per kind, across namespaces, of the objects matching `selector`,
        each kept with what planning reads of it (`Kind.unread`): memory grows with
        the number of jobs, not with the size of their pod templates. Batch Jobs,
        Services and pods are always listed; the runtimes' own kinds as `listings`
        say (None: the registry's, `registry.listings`), but those in `unlisted`,
        which hold no object of ours, the caller knows (`registry.unlisted`)."""
        jobs, services, pods = (
            tuple(found)
            for found in at_once(
                lambda: self.list_all(Kind.JOB, selector, unread=Kind.JOB.unread),
                lambda: self.list_all(Kind.SERVICE, selector, metadata_only=True),
                lambda: self.list_all(Kind.POD, selector, unread=Kind.POD.unread),
            )
        )
        live = LiveObjects(jobs, services, pods, pod_events=self._departed_pod_events(jobs, pods))
        skipped, unserved = set(), set()
        for listing in registry.listings() if listings is None else listings:
            if listing.kind in unlisted:
                skipped.add(listing.kind)
                continue
            if listing.only_if is not None and not listing.only_if(live):
                continue
            found = self._list_allowed(listing, selector if listing.selected else "")
            if found is None:
                unserved.add(listing.kind)
            live = live.with_kind(listing.kind, tuple(found or ()))
        return replace(live, unlisted=frozenset(skipped), unserved=frozenset(unserved))

    def _departed_pod_events(
        self, jobs: Sequence[KubeObject], pods: Sequence[KubeObject]
    ) -> tuple[KubeObject, ...]:
        """The Events saying how each gone pod that a batch Job's disruption condition
        names was taken away: one field-selected LIST per such pod, none in a sync that
        has none. Where Events cannot be read (not granted), the job is still replaced,
        its row saying only that a disruption took the pod, and a warning says why (the
        API server's "forbidden"): a grant taken away is not silent."""
        here = {(p["metadata"].get("namespace"), p["metadata"]["name"]) for p in pods}
        gone = sorted({named for j in jobs if (named := departed_pod(j)) and named not in here})
        found: list[KubeObject] = []
        for namespace, name in gone:
            query = {"fieldSelector": f"involvedObject.kind=Pod,involvedObject.name={name}"}
            listed = self._events(namespace, query, f"how pod {namespace}/{name} went")
            found += [e for e in listed if e.get("reason") in EVENT_REASONS]
        return tuple(found) + self._counted_pod_events(jobs, pods)

    def _counted_pod_events(
        self, jobs: Sequence[KubeObject], pods: Sequence[KubeObject]
    ) -> tuple[KubeObject, ...]:
        """The Events that say how a pod was taken away, about a gone pod of an `OnFailure`
        batch Job that counted more failed pods than it has (`counted_and_gone`): one LIST
        of each such reason per namespace, at most `EVENT_PAGE` Events each."""
        prefixes: dict[str, set[str]] = {}
        for job in jobs:
            if counted_and_gone(job, pods):
                namespace = str(job["metadata"].get("namespace") or "")
                prefixes.setdefault(namespace, set()).add(f"{job['metadata']['name']}-")
        found: list[KubeObject] = []
        for namespace, owners in sorted(prefixes.items()):
            for reason in EVENT_REASONS:
                query = {
                    "fieldSelector": f"involvedObject.kind=Pod,reason={reason}",
                    "limit": str(EVENT_PAGE),
                }
                listed = self._events(namespace, query, f"how pods in {namespace} went")
                found += [e for e in listed if _involved(e).startswith(tuple(owners))]
        return tuple(found)

    def _events(self, namespace: str, query: dict[str, str], what: str) -> list[KubeObject]:
        """The core/v1 Events of `namespace` that `query` selects; none where they are not
        granted (a warning says why: a grant taken away is not silent) or not served."""
        try:
            listed = self._call(
                "GET",
                f"/api/v1/namespaces/{namespace}/events",
                query=query,
                read=transport.read_object,
            )
        except ClusterForbidden as exc:  # not granted: say less, and why
            log.warning("%s is unsaid: %s", what, exc)
            return []
        except ClusterClientError:  # not served: say less
            return []
        return [said_within(e) for e in listed.get("items") or () if isinstance(e, dict)]

    def _list_allowed(self, listing: Listing, selector: str) -> list[KubeObject] | None:
        """`_list_if_served`, and none read where the listing may be forbidden and is."""
        try:
            return self._list_if_served(listing.kind, selector)
        except ClusterForbidden:  # 401/403 (`transport`): not granted
            if not listing.if_forbidden:
                raise
            log.info(listing.if_forbidden)
            return []

    def names_of(self, kind: Kind) -> frozenset[str]:
        """The names of every object of a cluster-scoped kind (none where it is not
        served: a runtime's CRD not installed)."""
        found = self._list_if_served(kind, "") or ()
        return frozenset(str(o["metadata"]["name"]) for o in found)

    # -- what `mxgitops check` reads (preflight.py) ----------------------------------

    def server_version(self) -> str:
        """The API server's version (`gitVersion` of GET /version)."""
        return str(self._request("GET", "/version").get("gitVersion") or "of unknown version")

    def default_storage_classes(self) -> list[str]:
        """The StorageClasses marked default: a PersistentVolumeClaim that names none
        gets one (none: it stays Pending)."""
        found = self._request("GET", "/apis/storage.k8s.io/v1/storageclasses")
        return sorted(
            str(item["metadata"]["name"])
            for item in found.get("items") or []
            if any(
                (item["metadata"].get("annotations") or {}).get(key) == "true"
                for key in DEFAULT_STORAGE_CLASS
            )
        )

    def namespace_exists(self, name: str) -> bool:
        try:
            self._request("GET", f"/api/v1/namespaces/{name}")
        except ClusterClientError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def _list_if_served(self, kind: Kind, selector: str) -> list[KubeObject] | None:
        """A LIST of a custom resource; None when the cluster answers 404 (its CRD is not
        installed, or is being reinstalled: none is seen, which proves none is there
        only to a caller that knows none was created)."""
        try:
            return self.list_all(kind, selector, unread=kind.unread)
        except ClusterClientError as exc:
            if exc.status == 404:
                return None
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
        path = path_of(kind, namespace)
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
        read = page_reader(kind, limit, unread, metadata_only, kind.api_version)
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
        path = f"{path_of(Kind.POD, namespace, pod)}/log"
        log = self._call("GET", path, query=query, read=transport.read_bytes)
        return log.decode("utf-8", "replace")

    def pod_log_since(
        self, namespace: str, pod: str, *, container: str, since: str, limit_bytes: int
    ) -> str:
        """A container's log from `since` (RFC 3339; "" from its start), each line after
        its timestamp, at most `limit_bytes` read: never the whole of a long log."""
        query = {"container": container, "timestamps": "true", "limitBytes": str(limit_bytes)}
        if since:
            query["sinceTime"] = since
        path = f"{path_of(Kind.POD, namespace, pod)}/log"
        log = self._call("GET", path, query=query, read=transport.read_bytes)
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
            time.sleep(GONE_POLL)
