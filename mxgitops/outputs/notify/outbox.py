"""The notifications' book, kept in a ConfigMap of the instance's home namespace.

Why a ConfigMap of its own, `mxgitops-notified-{instance}`, beside the ledger and not
in it nor in the note: the sinks run after the apply, once the Lease and the Git
cache are released, and the ledger is written only under the Lease (and holds only
finished jobs: a wait or a failed sync has no entry), the note only under the cache's
lock, before the sinks. What the sink alone writes, after the others, survives a
restarted pod like the ledger does, and is bounded (`transitions.MAX_ENTRIES`,
~130 bytes each: within a ConfigMap's 1 MiB). It is written with the resourceVersion
it was read at: two syncs' sinks at once cannot both think they wrote it.

A book that is not ours to read (not JSON, another shape: anyone with edit rights on
the namespace can write it) is started afresh, but not as a new one: what it held may
be told again, which is logged, rather than a failure missed.
"""

from __future__ import annotations

import json
import logging
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from mxgitops.errors import ClusterError, OutputError
from mxgitops.objects import Kind, KubeObject, ObjectRef, ownership_labels
from mxgitops.outputs.leased import Leased
from mxgitops.outputs.notify.transitions import Book, Entry

DATA_KEY = "notified.json"
VERSION = 1
log = logging.getLogger("mxgitops")


class BookAPI(Protocol):
    def get(self, ref: ObjectRef) -> KubeObject | None: ...

    def create_strict(self, obj: KubeObject) -> KubeObject: ...

    def replace(self, obj: KubeObject) -> KubeObject: ...


@dataclass(frozen=True)
class Kept:
    book: Book
    resource_version: str  # "": no ConfigMap yet
    text: str = ""  # as read: a book that did not change is not written


def name_of(instance: str) -> str:
    return f"mxgitops-notified-{instance}"


def read(api: BookAPI, *, instance: str, namespace: str) -> Kept:
    ref = ObjectRef(Kind.CONFIG_MAP, namespace, name_of(instance))
    try:
        found = api.get(ref)
    except ClusterError as exc:
        raise OutputError(f"notifications: their book {ref} cannot be read: {exc}") from None
    if found is None:
        return Kept(Book(new=True), "")
    version = str((found.get("metadata") or {}).get("resourceVersion") or "")
    text = (found.get("data") or {}).get(DATA_KEY, "")
    try:
        return Kept(decode(text), version, text)
    except (ValueError, TypeError, KeyError):
        log.warning("notifications: their book %s is not ours to read; started afresh", ref)
        return Kept(Book(), version)


def write(
    api: BookAPI,
    kept: Kept,
    book: Book,
    *,
    instance: str,
    namespace: str,
    leased: Leased = lambda _: nullcontext(),
) -> None:
    """Write `book`, unless it is what was read: a sync with nothing new writes nothing.
    The write is sent under `leased` (the sink's: the Lease)."""
    text = encode(book)
    if kept.resource_version and text == kept.text:
        return
    obj: KubeObject = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name_of(instance),
            "namespace": namespace,
            "labels": ownership_labels(instance),
        },
        "data": {DATA_KEY: text},
    }
    try:
        with leased("notifications: their book"):
            if kept.resource_version:
                obj["metadata"]["resourceVersion"] = kept.resource_version
                api.replace(obj)
            else:
                api.create_strict(obj)
    except ClusterError as exc:
        raise OutputError(f"notifications: their book was not written: {exc}") from None


def encode(book: Book) -> str:
    data = {
        "v": VERSION,
        "sent": {
            k: [e.seen, e.tries, int(e.done), *([e.retry_at] if e.retry_at else [])]
            for k, e in sorted(book.entries.items())
        },
        "waiting": dict(sorted(book.waiting.items())),
    }
    return json.dumps(data, separators=(",", ":"))


def decode(text: str) -> Book:
    data: Any = json.loads(text)
    if not isinstance(data, dict) or data.get("v") != VERSION:
        raise ValueError("not a book of this version")
    entries: dict[str, Entry] = {}
    for key, row in data["sent"].items():
        seen, tries, done, *later = row
        retry_at = later[0] if later else ""
        if not (
            isinstance(seen, str)
            and type(tries) is int
            and done in (0, 1)
            and isinstance(retry_at, str)
            and len(later) <= 1
            and len(retry_at) <= 20
        ):
            raise ValueError(f"entry {key[:80]!r}")
        entries[str(key)] = Entry(seen, tries, bool(done), retry_at)
    waiting = data["waiting"]
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in waiting.items()):
        raise ValueError("waiting")
    return Book(entries, dict(waiting))
