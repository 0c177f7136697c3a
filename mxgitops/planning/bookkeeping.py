"""Bookkeeping: which finished jobs the ledger records, keeps and forgets.

A finished job never runs again unless its spec changes, even once its objects
are gone; the ledger (`ledger.py`; `state/ledgerstore.py` stores it) is what remembers. Each
plan changes the ledger too, and this module decides how, from the plan's
changes, each ledger change with a reason (`LedgerChange`):

- a job seen finished is recorded, with why it failed if it failed; a run of its spec
  made after the ledger recorded that spec finished is another run, recorded anew when
  it finishes (`recorded_run`); and while the spec Git names stands recorded finished, a
  run of another spec (`standing`: a revert found it live) never takes its place;
- its entry is forgotten when its manifest was removed and its objects
  pruned, and put back if that prune did not go through (`put_back`);
- an entry that no manifest (valid or not) and no object names is marked
  unseen, the mark goes once something names it again, and it is forgotten
  after `DEFAULT_LEDGER_RETENTION` (or the configured retention) unnamed.

An invalid, unparseable, held or unlisted manifest therefore never costs an
entry. Like planning, this is pure: no I/O, the time is given, and the
ledger it returns is a new value (the same one when nothing changed).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from mxgitops.planning.ledger import STATES, Finished, JobKey, Ledger
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.record.stored import RecordShapeError, read_record, summary_json
from mxgitops.runtimes.shared.base import Live
from mxgitops.runtimes.shared.failure import Failure
from mxgitops.runtimes.shared.state import State

DEFAULT_LEDGER_RETENTION = timedelta(days=90)


class LedgerAction(StrEnum):
    RECORD = "record"  # seen finished: it will not run again
    UNSEEN = "unseen"  # no manifest or object names it: the retention starts
    SEEN = "seen"  # named again: the retention stops
    FORGET = "forget"  # pruned, or unnamed for longer than the retention


@dataclass(frozen=True)
class LedgerChange:
    action: LedgerAction
    entry: Finished  # the entry as it will be; for FORGET, the one forgotten
    reason: str

    @property
    def key(self) -> JobKey:
        return self.entry.key


class Seen(Protocol):
    """What the books read of a job the plan keeps (a `plan.Change`)."""

    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def key(self) -> JobKey: ...

    @property
    def state(self) -> State | None: ...

    @property
    def failure(self) -> Failure | None: ...


def ledger_changes(
    ledger: Ledger,
    seen: Sequence[Seen],
    *,
    pruned: Collection[JobKey],
    invalid: Collection[JobKey],
    live_jobs: Mapping[JobKey, Live],
    now: datetime,
    retention: timedelta,
    standing: Collection[JobKey] = frozenset(),
) -> tuple[LedgerChange, ...]:
    """Record every job seen finished; forget only pruned jobs and, after the retention,
    jobs that no manifest and no object names any more.

    `seen` are the jobs the plan names and does not prune, `pruned` those it prunes,
    `invalid` those whose manifests are invalid, `standing` those whose live objects are
    of another spec than the one Git names, which is recorded finished. Records come
    first, in the order seen; the other changes follow by job."""
    stamp = now.isoformat(timespec="seconds")
    book = []
    for c in seen:
        live = live_jobs.get(c.key)
        if live is None or not live.spec_hash or c.key in standing or c.state not in STATES:
            continue
        known = ledger.finished(c.key, live.spec_hash)
        if known is None or not recorded_run(known, live):
            failure = c.failure.to_json() if c.failure is not None else ""
            state = str(c.state)
            entry = Finished(c.namespace, c.name, live.spec_hash, state, stamp, failure=failure)
            book.append(LedgerChange(LedgerAction.RECORD, entry, f"seen {state.lower()}"))
    recorded = {c.key for c in book}
    named = {c.key for c in seen} | set(invalid)
    days = retention.days
    expired = now - retention
    recorded_count = len(book)
    for key, entry in ledger.entries.items():
        if key in recorded:
            continue
        if key in pruned:
            book.append(
                LedgerChange(LedgerAction.FORGET, entry, "manifest removed and its objects pruned")
            )
        elif key in named:
            if entry.unseen_since:
                seen_again = replace(entry, unseen_since="")
                book.append(LedgerChange(LedgerAction.SEEN, seen_again, "named again"))
        elif not entry.unseen_since:
            unseen = replace(entry, unseen_since=stamp)
            why = f"no manifest or object names it; forgotten after {days} days unless one does"
            book.append(LedgerChange(LedgerAction.UNSEEN, unseen, why))
        elif stamped_before(entry.unseen_since, expired):
            why = f"named by nothing since {entry.unseen_since}, longer than {days} days"
            book.append(LedgerChange(LedgerAction.FORGET, entry, why))
    book[recorded_count:] = sorted(book[recorded_count:], key=lambda c: c.key)
    return tuple(book)


def with_changes(ledger: Ledger, book: Sequence[LedgerChange]) -> Ledger:
    """`ledger` once `book` is applied to it; `ledger` itself when `book` is empty."""
    if not book:
        return ledger
    entries = dict(ledger.entries)
    for change in book:
        if change.action is LedgerAction.FORGET:
            del entries[change.key]
        else:
            entries[change.key] = change.entry
    return ledger.with_entries(entries)


def put_back(ledger: Ledger, book: Sequence[LedgerChange], failed: Collection[JobKey]) -> Ledger:
    """`ledger` (as `book` left it) with the entries forgotten because their jobs were
    pruned put back where that prune (a job in `failed`) did not go through."""
    back = {c.key: c.entry for c in book if c.action is LedgerAction.FORGET and c.key in failed}
    return ledger.with_entries({**ledger.entries, **back}) if back else ledger


def with_failure_logs(
    ledger: Ledger, book: Sequence[LedgerChange], logs: Mapping[JobKey, str]
) -> tuple[Ledger, tuple[LedgerChange, ...]]:
    """`ledger` and `book` with the failures of the jobs in `logs` carrying their log
    tails, so that the entries keep them once the pods are gone."""

    def entry(e: Finished) -> Finished:
        failure = Failure.from_json(e.failure) if e.key in logs and e.failure else None
        return replace(e, failure=failure.with_log(logs[e.key]).to_json()) if failure else e

    entries = {key: entry(e) for key, e in ledger.entries.items()}
    return ledger.with_entries(entries), tuple(replace(c, entry=entry(c.entry)) for c in book)


def with_records(
    ledger: Ledger, book: Sequence[LedgerChange], records: Mapping[JobKey, TrainingRecord]
) -> tuple[Ledger, tuple[LedgerChange, ...]]:
    """`ledger` and `book` with the entries `book` records now carrying the summary of
    their run's training record (entries recorded earlier keep the one they have)."""
    recording = {c.key for c in book if c.action is LedgerAction.RECORD and c.key in records}
    if not recording:
        return ledger, tuple(book)

    def entry(e: Finished) -> Finished:
        return replace(e, record=summary_json(records[e.key])) if e.key in recording else e

    entries = {key: entry(e) for key, e in ledger.entries.items()}
    return ledger.with_entries(entries), tuple(
        replace(c, entry=entry(c.entry)) if c.action is LedgerAction.RECORD else c for c in book
    )


def kept_record(entry: Finished | None, spec_hash: str | None) -> TrainingRecord | None:
    """The summary of its run's training record the ledger keeps for a finished job of
    `spec_hash` (what every output shows once its pods are gone); None if it keeps none,
    or one that is not ours (a damaged entry is not worth failing a sync for)."""
    if entry is None or not entry.record or entry.spec_hash != spec_hash:
        return None
    try:
        return read_record(entry.record)
    except RecordShapeError:
        return None


def recorded_run(entry: Finished, live: Live) -> bool:
    """Whether `live` is the run `entry` recorded finished: objects of its spec, made
    before the sync that recorded it. Objects of another spec, or of that spec made after
    it (run again by an earlier version, or under a ledger restored from a backup), are
    another run, of which the entry says nothing. Objects whose creation time cannot be
    read, or that the same second saw made and recorded, are taken for the recorded run:
    then its record holds, as it always did."""
    if live.spec_hash != entry.spec_hash:
        return False
    made = _parse_time(live.created) if live.created else None
    recorded = _parse_time(entry.finished_at)
    try:
        return made is None or recorded is None or made <= recorded
    except TypeError:  # one of them has no time zone
        return True


def stamped_before(stamp: str, moment: datetime) -> bool:
    """Whether the RFC 3339 `stamp` is before `moment` (an unreadable stamp is not)."""
    parsed = _parse_time(stamp)
    try:
        return parsed is not None and parsed < moment
    except TypeError:  # one of them has no time zone
        return False


@functools.lru_cache(maxsize=256)
def _parse_time(stamp: str) -> datetime | None:
    """Entries marked in the same sync share a stamp: parsed once, not per entry."""
    try:
        return datetime.fromisoformat(stamp)
    except ValueError:
        return None
