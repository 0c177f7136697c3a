"""Objects, the resourceVersion counter and the watch history.

Like etcd behind kube-apiserver, the store has one revision counter shared by
every object: each write takes the next number and stamps it (as a string)
into ``metadata.resourceVersion``; lists report the counter itself.  Every
write also appends an event (ADDED / MODIFIED / DELETED, with the previous
state so watchers with selectors can tell an object leaving their selection)
to a bounded history that watches replay from; a watch from a revision older
than the history is told ``410 Expired``, as after an etcd compaction.

Stored objects are never mutated in place (writes replace them), so events
and cached list encodings can share them safely.  One re-entrant lock guards
everything; ``changed`` wakes watchers.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .resources import RESOURCES, Resource

HISTORY_LENGTH = 200_000
# uuid.UUID(version=4): variant bits 10 (RFC 4122), version field 4.
_UUID4_CLEARED = ~(0xC000 << 48) & ~(0xF000 << 64)
_UUID4_SET = (0x8000 << 48) | (4 << 76)
_GENERATED_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand


@dataclass(frozen=True)
class Event:
    rv: int
    type: str  # ADDED MODIFIED DELETED
    res: Resource
    obj: dict[str, Any]
    prev: dict[str, Any] | None


class _Entry:
    """A stored object and, lazily, its JSON encoding as a typed-list item."""

    __slots__ = ("item", "obj")

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.item: bytes | None = None

    def encoded_item(self) -> bytes:
        if self.item is None:
            body = {k: v for k, v in self.obj.items() if k not in ("kind", "apiVersion")}
            self.item = compact_json(body)
        return self.item


_BY_KEY = {r.key: r for r in RESOURCES}

# json.dumps(value, separators=(",", ":")) without a new encoder per call. No check for
# circular references: what is encoded is decoded JSON or built from it, never circular.
_COMPACT = json.JSONEncoder(separators=(",", ":"), check_circular=False)


def compact_json(value: Any) -> bytes:
    """`value` encoded as kube-apiserver encodes: compact, ASCII."""
    return _COMPACT.encode(value).encode()


def key_of(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


class Store:
    def __init__(self, seed: int | None = None) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.rv = 1
        self.compacted_rv = 0
        self.closed = False
        self.rng = random.Random(seed)
        self.clock_offset = timedelta()
        self._timestamp: tuple[int, timedelta, str] = (0, self.clock_offset, "")
        self._objects: dict[str, dict[tuple[str, str], _Entry]] = {r.key: {} for r in RESOURCES}
        self._history: deque[Event] = deque()
        self._next_ip = 10
        # uid -> the (plural, key) of the object with that uid, and of those it owns:
        # garbage collection finds an owner's dependents without scanning every object.
        self._uids: dict[str, tuple[str, tuple[str, str]]] = {}
        self._owned: dict[str, set[tuple[str, tuple[str, str]]]] = {}
        # Per kind, its objects in key order, kept until the kind is next written: the
        # pages of one LIST are cut from one sort, not each from a sort of everything.
        self._writes: dict[str, int] = dict.fromkeys(self._objects, 0)
        self._ordered: dict[str, tuple[int, list[tuple[str, str]], list[_Entry]]] = {}

    # -- identities and time -------------------------------------------------
    def now(self) -> datetime:
        return datetime.now(UTC).replace(microsecond=0) + self.clock_offset

    def timestamp(self) -> str:
        """`now` as metav1.Time encodes it, formatted once a second (as the Date header)."""
        second, offset = int(time.time()), self.clock_offset
        cached = self._timestamp  # one (second, offset, text): a race only formats it twice
        if cached[0] != second or cached[1] != offset:
            now = datetime.fromtimestamp(second, UTC) + offset
            cached = self._timestamp = (second, offset, now.strftime("%Y-%m-%dT%H:%M:%SZ"))
        return cached[2]

    def new_uid(self) -> str:
        """`str(uuid.UUID(int=<128 random bits>, version=4))`, without building the UUID:
        the version and variant bits set as UUID sets them, then the 8-4-4-4-12 groups."""
        with self.lock:
            bits = self.rng.getrandbits(128)
        h = "%032x" % (bits & _UUID4_CLEARED | _UUID4_SET)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def random_suffix(self, length: int = 5) -> str:
        with self.lock:
            return "".join(self.rng.choice(_GENERATED_NAME_CHARS) for _ in range(length))

    def allocate_ip(self) -> str:
        with self.lock:
            n = self._next_ip
            self._next_ip += 1
        return f"10.96.{n // 250}.{n % 250 + 1}"

    # -- reads ---------------------------------------------------------------
    def get(self, res: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        entry = self._objects[res.key].get((namespace, name))
        return entry.obj if entry else None

    def entries(self, res: Resource, namespace: str | None) -> list[_Entry]:
        with self.lock:
            entries = self._objects[res.key]
            if namespace is None:
                return list(entries.values())
            return [e for (ns, _), e in entries.items() if ns == namespace]

    def objects(self, res: Resource, namespace: str | None = None) -> list[dict[str, Any]]:
        return [e.obj for e in self.entries(res, namespace)]

    def ordered(self, res: Resource) -> tuple[list[tuple[str, str]], list[_Entry]]:
        """The kind's keys (namespace, name) in order, and their entries."""
        with self.lock:
            writes = self._writes[res.key]
            cached = self._ordered.get(res.key)
            if cached is None or cached[0] != writes:
                table = self._objects[res.key]
                keys = sorted(table)
                cached = (writes, keys, [table[k] for k in keys])
                self._ordered[res.key] = cached
            return cached[1], cached[2]

    def exists(self, uid: str) -> bool:
        return uid in self._uids

    def dependents(self, uid: str) -> list[tuple[Resource, dict[str, Any]]]:
        """The objects whose ownerReferences name `uid`."""
        with self.lock:
            found = sorted(self._owned.get(uid, ()))
            return [(_BY_KEY[plural], self._objects[plural][key].obj) for plural, key in found]

    def _index(self, plural: str, obj: dict[str, Any], add: bool) -> None:
        meta, where = obj["metadata"], (plural, key_of(obj))
        uid = meta.get("uid")
        if uid:
            if add:
                self._uids[uid] = where
            else:
                self._uids.pop(uid, None)
        for ref in meta.get("ownerReferences") or []:
            owned = self._owned.setdefault(ref.get("uid", ""), set())
            if add:
                owned.add(where)
            else:
                owned.discard(where)

    # -- writes --------------------------------------------------------------
    def _record(
        self, kind: str, res: Resource, obj: dict[str, Any], prev: dict[str, Any] | None
    ) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._history.append(Event(self.rv, kind, res, obj, prev))
        if len(self._history) > HISTORY_LENGTH:
            self.compacted_rv = self._history.popleft().rv
        self.changed.notify_all()
        return obj

    def put(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` (which the caller hands over) as ADDED or MODIFIED."""
        with self.lock:
            table, key = self._objects[res.key], key_of(obj)
            prev = table.get(key)
            self._record("MODIFIED" if prev else "ADDED", res, obj, prev.obj if prev else None)
            self._writes[res.key] += 1
            if prev is not None:
                self._index(res.key, prev.obj, add=False)
            self._index(res.key, obj, add=True)
            table[key] = _Entry(obj)
            return obj

    def remove(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """Delete the object; the DELETED event carries a new resourceVersion."""
        with self.lock:
            prev = self._objects[res.key].pop(key_of(obj))
            self._writes[res.key] += 1
            self._index(res.key, prev.obj, add=False)
            final = {**prev.obj, "metadata": dict(prev.obj["metadata"])}
            return self._record("DELETED", res, final, prev.obj)

    def compact(self) -> None:
        """Forget the watch history, as an etcd compaction does."""
        with self.lock:
            self._history.clear()
            self.compacted_rv = self.rv

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.changed.notify_all()

    # -- watch ---------------------------------------------------------------
    def events_after(self, rv: int, accept: Callable[[Event], bool]) -> list[Event]:
        """Events newer than ``rv`` that ``accept`` (call with the lock held)."""
        found: list[Event] = []
        for event in reversed(self._history):
            if event.rv <= rv:
                break
            if accept(event):
                found.append(event)
        found.reverse()
        return found
