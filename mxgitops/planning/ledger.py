"""The ledger: which (job, spec hash) pairs have finished, as the planner reads it.

A finished job must never run again unless its spec changes, even after the
job-wide TTL (`runpolicy.py`) or a clean-pod policy deleted its objects. The objects cannot
remember that, so each instance keeps its finished pairs in the cluster (how they
are stored: `state/ledgerstore.py`). Nothing is ever dropped to make room.

Which entries are kept or dropped is the planner's decision (`plan.py`).
The ledger also says which runtimes this instance may have objects of
(`runtimes`: `batch`, or `batch,jobset`), so that a sync skips the LIST of a
kind that holds none of them (`runtimes.unlisted`): a no-op sync of an instance
that never used JobSet lists one kind fewer. Only a positive record skips a
LIST: no ledger, a ledger without the record (written by an earlier version) or an
unreadable one reads as "any runtime may have objects". It names a runtime
before the first object of it is created (`plan.Plan.recorded_first`), and
drops one only after a sync that listed that runtime's kind, found none and
creates none. A name this version does not know (a newer version's) is kept.

This module is the value only: no encoding, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

STATES = ("Succeeded", "Failed")

JobKey = tuple[str, str]


@dataclass(frozen=True)
class Finished:
    namespace: str
    name: str
    spec_hash: str
    state: str  # Succeeded or Failed
    finished_at: str  # RFC 3339, when this sync first saw it finished
    unseen_since: str = ""  # RFC 3339: since when neither a manifest nor objects name it
    failure: str = ""  # why it failed (JSON of a `Failure`), kept once its pods are gone
    record: str = ""  # its run's training record, summary form (`record/stored.py`)

    @property
    def key(self) -> JobKey:
        return (self.namespace, self.name)


@dataclass(frozen=True)
class Stored:
    """One shard as the cluster holds it: what to compare with, and the version to replace."""

    name: str
    resource_version: str
    text: str
    runtimes: str = ""  # the first shard's record of runtimes, as stored ("" if none)


@dataclass(frozen=True)
class Ledger:
    entries: Mapping[JobKey, Finished] = field(default_factory=dict)
    stored: tuple[Stored, ...] = ()  # the shards as read; () when none exists yet
    shards: int = 1  # the largest shard count found: the layout never shrinks
    # The runtimes this instance may have objects of; None when the ledger does not
    # say (none yet, no record, or an unreadable one): then any runtime may.
    runtimes: frozenset[str] | None = None
    unreadable: str = ""  # why a stored record of runtimes could not be read

    def finished(self, key: JobKey, spec_hash: str) -> Finished | None:
        entry = self.entries.get(key)
        return entry if entry is not None and entry.spec_hash == spec_hash else None

    def with_entries(self, entries: Mapping[JobKey, Finished]) -> Ledger:
        """The same stored shards, holding `entries` once written."""
        return replace(self, entries=dict(entries))

    def with_runtimes(self, runtimes: frozenset[str]) -> Ledger:
        """The same, recording `runtimes` once written (itself if it already does)."""
        if runtimes == self.runtimes:
            return self
        return replace(self, runtimes=runtimes, unreadable="")

    def with_stored(self, other: Ledger) -> Ledger:
        """The same, to be written over the shards as `other` found or left them."""
        return replace(self, stored=other.stored, shards=max(self.shards, other.shards))
