"""The values a plan is made of: what is done to each job, and why.

`plan.py` decides them; `apply.py` carries them out and nothing else decides;
`report.py`, `review.py` and the sinks of `outputs/sinks.py` say what they were. A
`Plan` is a frozen value that fully describes what a sync will write (as
terraform's plan does), so it can be shown before it is applied (`--dry-run`,
the pull-request plan) and tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from mxgitops.objects import Kind, KubeObject, ObjectRef
from mxgitops.planning.bookkeeping import (
    DEFAULT_LEDGER_RETENTION,
    LedgerChange,
    put_back,
    with_failure_logs,
    with_records,
)
from mxgitops.planning.ledger import JobKey, Ledger
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.runtimes.shared.accelerators import AcceleratorConfig
from mxgitops.runtimes.shared.failure import Failure
from mxgitops.runtimes.shared.inplace import InPlace
from mxgitops.runtimes.shared.podtemplate import RenderContext
from mxgitops.runtimes.shared.reruns import DEFAULT_MAX_DISRUPTION_RUNS
from mxgitops.runtimes.shared.state import MxReplicaStatus, State

DEFAULT_MAX_PRUNE_SHARE = 0.5


class Action(StrEnum):
    CREATE = "create"
    REPLACE = "replace"
    REPAIR = "repair"  # missing objects recreated, hand-edited fields set back
    UPDATE = "update"  # fields a live Job lets change (suspend...) patched: no restart
    DELETE = "delete"
    CLEAN = "clean"  # a finished job's pods go, as its cleanPodPolicy asks
    STOP = "stop"  # a finished job's replicas still active go: it holds nothing
    HOLD = "hold"  # a change waits: for the job to finish, a valid manifest, the policy
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Change:
    namespace: str
    name: str
    action: Action
    reason: str
    state: State | None = None  # the live job's state, if it has objects or a ledger entry
    spec_hash: str | None = None  # desired spec hash, or the live one for a delete
    source: str = ""
    replicas: tuple[MxReplicaStatus, ...] = ()  # per replica set, from live objects
    creates: tuple[KubeObject, ...] = ()
    deletes: tuple[ObjectRef, ...] = ()
    runtime_id: str = ""  # the live runtime once this change is applied
    failure: Failure | None = None  # why a Failed job failed, from its pods or the ledger
    patches: tuple[InPlace, ...] = ()  # in-place changes of live objects
    commit: str = ""  # the commit that submitted the live objects (their annotation)
    # A replace: its deletes are in the foreground and its creates wait until they are
    # gone, so the old runtime's pods have stopped before the new runtime's start (two
    # runtimes at once would hold twice the GPUs, and ps-lite peers could cross).
    starts_after_deletes: bool = False
    # The cluster the job runs on, where its runtime says it is another (a queue that
    # dispatches the job to a worker cluster): "" for this one.
    placement: str = ""
    # Why its state may be stale: that cluster does not answer (`Live.unreachable`).
    unreachable: str = ""
    queue: str = ""  # the Kueue LocalQueue it names (its manifest's, else its live objects')
    record: TrainingRecord | None = None  # its run's training (`state/training.py`)

    @property
    def key(self) -> JobKey:
        return (self.namespace, self.name)

    @property
    def writes(self) -> bool:
        return bool(self.creates or self.deletes or self.patches)

    @property
    def first(self) -> tuple[ObjectRef, ...]:
        """Creates that must succeed before the others are written: the scheduler's
        Service. If another owner holds its name, the batch Jobs are not started, or
        every process would dial that stranger's Service."""
        return tuple(ObjectRef.of(o) for o in self.creates if o["kind"] == Kind.SERVICE)


@dataclass(frozen=True)
class PlanOptions:
    instance: str
    commit: str = ""
    accelerators: Mapping[str, AcceleratorConfig] = field(default_factory=dict)
    names: Mapping[Kind, frozenset[str]] = field(default_factory=dict)  # `RenderContext`'s
    prune: bool = True
    max_prune_share: float = DEFAULT_MAX_PRUNE_SHARE
    force_prune: bool = False
    now: datetime | None = None  # when finished jobs are recorded in the ledger
    cancel: frozenset[str] = frozenset()  # namespace/name: a removal that waits for nothing
    ledger_retention: timedelta = DEFAULT_LEDGER_RETENTION
    # Runs of one spec made anew for a disruption, in a row, before it is Failed.
    max_disruption_runs: int = DEFAULT_MAX_DISRUPTION_RUNS

    def render_context(self) -> RenderContext:
        return RenderContext(
            instance=self.instance,
            commit=self.commit,
            accelerators=self.accelerators,
            names=self.names,
        )


@dataclass(frozen=True)
class Plan:
    changes: tuple[Change, ...]
    ledger: Ledger = field(default_factory=Ledger)  # as it should be after this sync
    ledger_changed: bool = False
    prune_refused: str | None = None  # why deletions were held back, if they were
    ledger_changes: tuple[LedgerChange, ...] = ()
    # The ledger as read, recording the runtimes of `ledger`: to be written before any
    # change is applied, because the jobs `records_first` create objects of a runtime it
    # does not record yet (None when none do). They are not started if it fails.
    recorded_first: Ledger | None = None
    records_first: tuple[JobKey, ...] = ()

    def ledger_after(self, failed: Collection[JobKey]) -> Ledger:
        """The ledger to write once applied: an entry forgotten because its job was
        pruned stays if that prune (a job in `failed`) did not go through."""
        return put_back(self.ledger, self.ledger_changes, failed)

    @property
    def writes(self) -> bool:
        return self.ledger_changed or any(c.writes for c in self.changes)

    def with_failure_logs(self, logs: Mapping[JobKey, str]) -> Plan:
        """The same plan, the failures of the jobs in `logs` carrying their log tails:
        in the changes (what this sync reports) and the ledger entries (what is kept)."""
        changes = tuple(
            replace(c, failure=c.failure.with_log(logs[c.key]))
            if c.key in logs and c.failure is not None
            else c
            for c in self.changes
        )
        ledger, book = with_failure_logs(self.ledger, self.ledger_changes, logs)
        return replace(self, changes=changes, ledger=ledger, ledger_changes=book)

    def with_records(self, records: Mapping[JobKey, TrainingRecord]) -> Plan:
        """The same plan, its runs carrying their training records: in the changes (what
        this sync reports), and the entries this sync records finished (their summary
        form, which outlives the pods and the note)."""
        if not records:
            return self
        changes = tuple(
            replace(c, record=records[c.key]) if c.key in records else c for c in self.changes
        )
        ledger, book = with_records(self.ledger, self.ledger_changes, records)
        return replace(self, changes=changes, ledger=ledger, ledger_changes=book)

    def count(self, action: Action) -> int:
        return sum(1 for c in self.changes if c.action is action)
