"""The ledger: which (job, spec hash) pairs have finished, kept in the cluster.

A finished job must never run again unless its spec changes, even after the
TTL controller or a clean-pod policy deleted its objects. The objects cannot
remember that, so each instance keeps one ConfigMap of finished pairs in its
home namespace. This module is pure: it encodes and decodes that ConfigMap;
the sync reads and writes it through `cluster.py`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mxgitops.objects import Kind, KubeObject, ObjectRef, ownership_labels

DATA_KEY = "finished.json"
# A ConfigMap holds at most 1 MiB; stay well below it. An entry is ~150 bytes.
MAX_BYTES = 900 * 1024

JobKey = tuple[str, str]


@dataclass(frozen=True)
class Finished:
    namespace: str
    name: str
    spec_hash: str
    state: str  # Succeeded or Failed
    finished_at: str  # RFC 3339, when this sync first saw it finished

    @property
    def key(self) -> JobKey:
        return (self.namespace, self.name)


@dataclass(frozen=True)
class Ledger:
    entries: Mapping[JobKey, Finished] = field(default_factory=dict)
    resource_version: str | None = None  # None: the ConfigMap does not exist yet

    def finished(self, key: JobKey, spec_hash: str) -> Finished | None:
        entry = self.entries.get(key)
        return entry if entry is not None and entry.spec_hash == spec_hash else None

    def updated(self, record: Iterable[Finished], keep: set[JobKey]) -> Ledger:
        """A ledger with `record` added, keeping only the jobs in `keep`: a job whose
        manifest is gone and whose objects are gone is forgotten."""
        entries = {k: v for k, v in self.entries.items() if k in keep}
        entries.update((f.key, f) for f in record)
        return Ledger(entries, self.resource_version)


def config_map_ref(instance: str, namespace: str) -> ObjectRef:
    return ObjectRef(Kind.CONFIG_MAP, namespace, f"mxgitops-ledger-{instance}")


def from_config_map(obj: Mapping[str, Any] | None) -> Ledger:
    if obj is None:
        return Ledger()
    raw = json.loads((obj.get("data") or {}).get(DATA_KEY) or "[]")
    entries = {(e["namespace"], e["name"]): Finished(**e) for e in raw}
    return Ledger(entries, obj["metadata"].get("resourceVersion"))


def to_config_map(ledger: Ledger, *, instance: str, namespace: str) -> KubeObject:
    ref = config_map_ref(instance, namespace)
    metadata: dict[str, Any] = {
        "name": ref.name,
        "namespace": namespace,
        "labels": ownership_labels(instance),
    }
    if ledger.resource_version is not None:
        metadata["resourceVersion"] = ledger.resource_version
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {DATA_KEY: _encode(ledger.entries.values())},
    }


def _encode(entries: Iterable[Finished]) -> str:
    """Newest first, dropping the oldest entries if the ConfigMap would overflow."""
    ordered = sorted(entries, key=lambda e: (e.finished_at, e.key), reverse=True)
    rows = [
        {
            "namespace": e.namespace,
            "name": e.name,
            "spec_hash": e.spec_hash,
            "state": e.state,
            "finished_at": e.finished_at,
        }
        for e in ordered
    ]
    text = json.dumps(rows, sort_keys=True, separators=(",", ":"))
    while len(text.encode()) > MAX_BYTES and rows:
        rows = rows[: len(rows) * 9 // 10]
        text = json.dumps(rows, sort_keys=True, separators=(",", ":"))
    return text
