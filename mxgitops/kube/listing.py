"""One LIST, page by page, within bounds a server cannot push past.

`cluster.Cluster.list_all` makes the requests; this module says how a page is
read and when a LIST has gone on too long. A LIST is one call to the caller, so
its bounds are a call's: what it promises, whatever the server answers:

- each page's body is decoded as it arrives (`listdecode`), each item trimmed to
  what planning reads before the next is decoded, and checked to be an object a
  server could have stored (an object with `metadata` and a `name`; maps of
  strings for labels and annotations): anything else is the server's fault, a
  `ValueError` the transport turns into a one-line `ClusterError`, raised before
  anything is written; the strings of its status are kept on one line and bounded
  (`clustertext`);
- a page holds at most the `limit` of items asked for (the API server never
  sends more), so a body whose items never end is refused, not kept;
- a `continue` token given again, more than `LIST_PAGES` pages, more than
  `LIST_RESTARTS` continuations expiring (410), or all its pages taking
  longer than `LIST_TIME` times the request timeout: a `ClusterError` that says
  which (a LIST that never ends is no answer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mxgitops.errors import ClusterError
from mxgitops.kube.clustertext import said_within
from mxgitops.kube.exchange import Response
from mxgitops.kube.listdecode import decode_list, interned
from mxgitops.objects import Kind, KubeObject
from mxgitops.runtimes.shared import livecheck

# Objects per LIST request. A page is decoded as it arrives, so its size costs no client
# memory: 1,000 dist jobs (7,000 Jobs, 7,000 pods and their retries) are one page per kind.
LIST_PAGE_SIZE = 10_000
LIST_READ_SIZE = 64 * 1024  # bytes of a LIST's body read (and held undecoded) at a time
# A LIST of the objects' metadata alone (PartialObjectMetadataList), else the whole list
# from a server that cannot (any since Kubernetes 1.15 can).
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
LIST_PAGES = 1_000  # ten million objects at the default page size
LIST_RESTARTS = 3  # continuations expired (410) in one LIST before it is given up
LIST_TIME = 10  # a LIST, all its pages and restarts, gets this many request timeouts

Trim = tuple[tuple[str, str], ...]  # (section, field) pairs nobody reads


class Progress:
    """How far one LIST has gone: its pages, tokens, restarts and time."""

    def __init__(self, path: str, clock: Callable[[], float], timeout: float) -> None:
        self.path, self.clock = path, clock
        self.timeout = timeout * LIST_TIME
        self.deadline = clock() + self.timeout
        self.pages = 0
        self.restarts = 0
        self.tokens: set[str] = set()

    def budget(self, call_timeout: float) -> float:
        """The next page's timeout: its own, within what is left of the LIST's."""
        left = self.deadline - self.clock()
        if left <= 0:
            raise self._error(f"took longer than {self.timeout:g} s in all")
        return min(call_timeout, left)

    def next_page(self, token: str) -> None:
        self.pages += 1
        if token in self.tokens:
            raise self._error("gave the same continue token again")
        if self.pages >= LIST_PAGES:
            raise self._error(f"ran past {LIST_PAGES} pages")
        self.tokens.add(token)

    def restart(self) -> None:
        self.restarts += 1
        if self.restarts > LIST_RESTARTS:
            raise self._error(f"expired its continuation (410) {self.restarts} times")
        self.tokens.clear()

    def _error(self, what: str) -> ClusterError:
        return ClusterError(
            f"the Kubernetes API's LIST of {self.path} {what}: a server gone wrong; "
            "nothing was written"
        )


def page_reader(
    kind: Kind, limit: int, unread: Trim, metadata_only: bool, api_version: str
) -> Callable[[Response], tuple[list[KubeObject], str]]:
    """What reads one page's body: its items, trimmed, and its `continue` token ("" if
    it is the last). ValueError for a body no API server would send."""
    unread = (("metadata", "managedFields"), *unread)
    partial = "PartialObjectMetadata"  # an item's kind in a metadata-only list

    def read(response: Response) -> tuple[list[KubeObject], str]:
        page: list[KubeObject] = []  # of this attempt: a retried page starts empty

        def keep(item: Any) -> None:
            if len(page) >= limit:
                raise ValueError(f"more than the {limit} items asked for in one page")
            _check(item, len(page))
            status = item.get("status")
            problem = livecheck.status_problem(kind, status) if status else ""
            if problem:
                name = item["metadata"]["name"]
                raise ValueError(f"list item {len(page)} ({name}): its {problem}")
            if item.get("kind") in (None, partial):  # typed lists leave it off their items
                item["kind"], item["apiVersion"] = str(kind), api_version
            for section, name in unread:
                (item.get(section) or {}).pop(name, None)
            for section, name, keys in kind.partly_read:
                _keep_of_each(item.get(section), name, keys)
            kept = interned(item)
            if kept.get("status"):  # free text of controllers and programs: `clustertext`
                kept["status"] = said_within(kept["status"])
            page.append(kept)

        rest = decode_list(lambda: response.read(LIST_READ_SIZE), keep)
        metadata = rest.get("metadata")
        more = metadata.get("continue") if isinstance(metadata, dict) else None
        if more is not None and not isinstance(more, str):
            raise ValueError("a continue token that is not a string")
        return page, more or ""

    return read


def _keep_of_each(section: Any, name: str, keys: tuple[str, ...]) -> None:
    """Each item of the list `section[name]` with only `keys`."""
    if isinstance(section, dict) and isinstance(section.get(name), list):
        section[name] = [
            {key: value for key, value in entry.items() if key in keys}
            for entry in section[name]
            if isinstance(entry, dict)
        ]


def _check(item: Any, index: int) -> None:
    """An item is an object a server could have stored: planning reads its metadata
    (name, namespace, labels, annotations) and its spec and status as objects."""
    if not isinstance(item, dict):
        raise ValueError(f"list item {index} is not an object: {str(item)[:80]}")
    metadata = item.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        raise ValueError(f"list item {index} without metadata and its name")
    if not isinstance(metadata.get("namespace", ""), str):
        raise ValueError(f"list item {index}: its metadata.namespace is not a string")
    for key in ("labels", "annotations"):
        values = metadata.get(key)
        if values is not None and not (
            isinstance(values, dict) and all(isinstance(v, str) for v in values.values())
        ):
            raise ValueError(f"list item {index}: its metadata.{key} is not a map of strings")
    for section in ("spec", "status"):
        if not isinstance(item.get(section, {}), dict | None):
            raise ValueError(f"list item {index}: its {section} is not an object")
