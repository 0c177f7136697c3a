"""The ledger's storage: ConfigMaps in the instance's home namespace.

The entries are spread over shards (`mxgitops-ledger-{instance}`, `….1`, `….2`, …:
a dot, which no instance name has, so two instances never want the same name; a
job's shard is a hash of its name modulo the shard count, a power of two that
doubles when a shard would pass 900 KiB), and all shards are read with one LIST,
so a sync costs the same number of requests with 10 or 100,000 finished jobs. A
ledger of one shard is a single ConfigMap. The first shard also holds the record
of runtimes (`runtimes`, comma-separated; the value: `planning/ledger.py`).

This module encodes and decodes the shards, refuses to guess at a damaged one
(`StateDamagedError`, with how to repair it), and writes the shards that
changed through a small API (`kube/cluster.py` in production). A write whose
response was lost is recognised by reading the shard back.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from mxgitops.errors import ClusterClientError, StateDamagedError
from mxgitops.objects import KubeObject, ObjectRef, ownership_labels
from mxgitops.planning.ledger import STATES, Finished, JobKey, Ledger, Stored
from mxgitops.record.stored import MAX_SUMMARY_BYTES

DATA_KEY = "finished.json"
SHARDS_KEY = "shards"  # the shard count the ConfigMap was written with (absent: 1)
# In the first shard: the runtimes this instance may have objects of, comma-separated.
RUNTIMES_KEY = "runtimes"
_RUNTIMES = re.compile(r"^[a-z][a-z0-9]*(,[a-z][a-z0-9]*)*$")
# A ConfigMap holds at most 1 MiB; stay well below it. An entry is ~170 bytes.
MAX_BYTES = 900 * 1024
MAX_SHARDS = 1024  # ~5 million finished jobs
_FIELDS = ("namespace", "name", "spec_hash", "state", "finished_at")
_KEYS = frozenset(_FIELDS)
_OPTIONAL = ("unseen_since", "failure", "record")
_KEYS_UNSEEN = _KEYS | set(_OPTIONAL)


class LedgerAPI(Protocol):
    def get(self, ref: ObjectRef) -> KubeObject | None: ...

    def create_strict(self, obj: KubeObject) -> KubeObject: ...

    def replace(self, obj: KubeObject) -> KubeObject: ...


def shard_name(instance: str, index: int) -> str:
    base = f"mxgitops-ledger-{instance}"
    return base if index == 0 else f"{base}.{index}"


def is_shard(name: str, instance: str) -> bool:
    return re.fullmatch(rf"mxgitops-ledger-{re.escape(instance)}(\.[1-9][0-9]*)?", name) is not None


def shard_of(key: JobKey, shards: int) -> int:
    return zlib.crc32(f"{key[0]}/{key[1]}".encode()) % shards


# -- decoding ---------------------------------------------------------------------


def from_config_maps(objects: Iterable[Mapping[str, Any]]) -> Ledger:
    """The ledger held by these shards. A job found in two shards (a layout change cut
    short) keeps its newest entry: the union never forgets a finished job."""
    entries: dict[JobKey, Finished] = {}
    stored, shards = [], 1
    runtimes: frozenset[str] | None = None
    unreadable = ""
    for obj in sorted(objects, key=lambda o: str(o["metadata"]["name"])):
        rows, count = _decode(obj)
        shards = max(shards, count)
        data = obj.get("data") or {}
        first = "." not in str(obj["metadata"]["name"])  # the others end in .1, .2, …
        recorded = data.get(RUNTIMES_KEY) if first else None
        stored.append(
            Stored(
                obj["metadata"]["name"],
                str(obj["metadata"].get("resourceVersion") or ""),
                data.get(DATA_KEY) or "",
                recorded if isinstance(recorded, str) else "",
            )
        )
        if recorded is not None:
            runtimes, unreadable = _runtimes(obj, recorded)
        for entry in rows:
            key = (entry.namespace, entry.name)
            known = entries.get(key)
            if known is None or (known.finished_at, known.spec_hash) < (
                entry.finished_at,
                entry.spec_hash,
            ):
                entries[key] = entry
    return Ledger(entries, tuple(stored), shards, runtimes, unreadable)


def _runtimes(obj: Mapping[str, Any], recorded: Any) -> tuple[frozenset[str] | None, str]:
    """The first shard's record of runtimes, or None and why it cannot be read: never a
    guess, which could skip the LIST of a kind that holds objects of ours."""
    if isinstance(recorded, str) and _RUNTIMES.match(recorded):
        return frozenset(recorded.split(",")), ""
    name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace", "")
    return None, (
        f"the ledger ConfigMap {namespace}/{name} has {RUNTIMES_KEY}: {recorded!r}, not a "
        "comma-separated list of runtimes (such as 'batch,jobset'); every runtime's objects "
        "are listed, and the record is written anew once a sync has listed them"
    )


def _decode(obj: Mapping[str, Any]) -> tuple[list[Finished], int]:
    data = obj.get("data") or {}
    try:
        count = int(data.get(SHARDS_KEY) or 1)
        if not 1 <= count <= MAX_SHARDS:
            raise ValueError(f"{SHARDS_KEY} is {count}")
        raw = json.loads(data.get(DATA_KEY) or "[]")
        if not isinstance(raw, list):
            raise ValueError(f"{DATA_KEY} is not a list")
        return [_row(index, row) for index, row in enumerate(raw)], count
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise _damaged(obj, str(exc)) from exc


def _row(index: int, row: Any) -> Finished:
    """One entry, checked strictly (a wrong spec hash would run a finished job again);
    the common case is checked in a few C-level steps: 100,000 entries per sync."""
    if not isinstance(row, dict):
        raise ValueError(f"entry {index} is not an object")
    keys = row.keys()
    if keys != _KEYS and not _KEYS < keys <= _KEYS_UNSEEN:
        unknown = sorted(keys - _KEYS_UNSEEN)
        missing = [name for name in _FIELDS if name not in row]
        what = f"unknown field {unknown[0]!r}" if unknown else f"no {missing[0]!r}"
        raise ValueError(f"entry {index} has {what}")
    try:
        "".join(row.values())  # every value a string
    except TypeError:
        raise ValueError(f"entry {index} has a value that is not a string") from None
    if len(row.get("record", "")) > MAX_SUMMARY_BYTES:
        raise ValueError(f"entry {index} has a training record of more than {MAX_SUMMARY_BYTES}")
    if row["state"] not in STATES:
        raise ValueError(f"entry {index} has the state {row['state']!r}, not a finished one")
    return Finished(**row)


def _damaged(obj: Mapping[str, Any], problem: str) -> StateDamagedError:
    name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace", "")
    return StateDamagedError(
        f"the ledger ConfigMap {namespace}/{name} is damaged ({' '.join(problem.split())}); "
        "nothing was applied, so no finished job runs again; repair it with "
        f"`kubectl -n {namespace} edit configmap {name}` or restore it from a backup "
        "(deleting it makes the finished jobs it records run again)"
    )


# -- encoding ---------------------------------------------------------------------


def to_config_maps(book: Ledger, *, instance: str, namespace: str) -> list[KubeObject]:
    """Every shard of the layout `book` needs, fresh objects (no resourceVersion)."""
    shards = book.shards
    while True:
        texts = _texts(book.entries.values(), shards)
        if all(len(t.encode()) <= MAX_BYTES for t in texts) or shards >= MAX_SHARDS:
            break
        shards *= 2
    if any(len(t.encode()) > MAX_BYTES for t in texts):
        raise StateDamagedError(f"the ledger needs more than {MAX_SHARDS} ConfigMaps")
    shard_maps = [
        _config_map(shard_name(instance, index), namespace, instance, text, shards)
        for index, text in enumerate(texts)
    ]
    if book.runtimes is not None:
        shard_maps[0]["data"][RUNTIMES_KEY] = ",".join(sorted(book.runtimes))
    return shard_maps


def _texts(entries: Iterable[Finished], shards: int) -> list[str]:
    rows: list[list[dict[str, str]]] = [[] for _ in range(shards)]
    for e in sorted(entries, key=lambda e: (e.finished_at, e.key), reverse=True):
        row = {name: getattr(e, name) for name in _FIELDS}
        for name in _OPTIONAL:
            if getattr(e, name):
                row[name] = getattr(e, name)
        rows[shard_of(e.key, shards)].append(row)
    return [json.dumps(r, sort_keys=True, separators=(",", ":")) for r in rows]


def _config_map(name: str, namespace: str, instance: str, text: str, shards: int) -> KubeObject:
    data = {DATA_KEY: text}
    if shards > 1:
        data[SHARDS_KEY] = str(shards)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": ownership_labels(instance)},
        "data": data,
    }


# -- writing ----------------------------------------------------------------------


def save(api: LedgerAPI, book: Ledger, *, instance: str, namespace: str) -> Ledger:
    """Write the shards whose content changed (new shards first, so an entry moving
    to a new shard is never absent from both); return the ledger as now stored, with
    the versions a later write in the same sync replaces."""
    stored = {s.name: s for s in book.stored}
    creates, replaces = [], []
    for obj in to_config_maps(book, instance=instance, namespace=namespace):
        known = stored.get(obj["metadata"]["name"])
        data = obj["data"]
        if known is None:
            creates.append(obj)
        elif known.text != data[DATA_KEY] or known.runtimes != data.get(RUNTIMES_KEY, ""):
            # A shard whose rows stay put keeps an older shard count: readers take the largest.
            obj["metadata"]["resourceVersion"] = known.resource_version
            replaces.append(obj)
    for obj in creates + replaces:
        version = _write(api, api.create_strict if obj in creates else api.replace, obj)
        name, data = obj["metadata"]["name"], obj["data"]
        stored[name] = Stored(name, version, data[DATA_KEY], data.get(RUNTIMES_KEY, ""))
    return replace(book, stored=tuple(stored[name] for name in sorted(stored)))


def _write(api: LedgerAPI, send: Callable[[KubeObject], KubeObject], obj: KubeObject) -> str:
    """Create or replace one shard, and return its new resourceVersion; a 409 is our own
    write if the shard now holds exactly what we sent (the response to it was lost and
    the client retried)."""
    try:
        answer = send(obj)
    except ClusterClientError as exc:
        if exc.status != 409:
            raise
        current = api.get(ObjectRef.of(obj))
        if current is None or (current.get("data") or {}) != obj["data"]:
            raise
        answer = current
    return str((answer.get("metadata") or {}).get("resourceVersion") or "")
