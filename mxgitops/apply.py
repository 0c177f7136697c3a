"""Apply: execute a Plan against the cluster, and nothing the plan does not say.

Deletions run first (a replace frees its old runtime before the new one
starts), together with in-place patches (`Change.patches`: independent of
anything else), then the creations a change needs first (`Change.first`),
then the others, each phase with the cluster's bounded parallelism.
A failed write does not stop the others: the change set records, per job,
what was done and what failed, so a partial apply is reported honestly and
the next sync finishes the work (every write is idempotent).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mxgitops.errors import MxGitOpsError
from mxgitops.ledger import JobKey
from mxgitops.objects import Create, Delete, ObjectRef, Patch, Write, WriteResult
from mxgitops.plan import Change, Plan


class WriteAPI(Protocol):
    def write(
        self, writes: Sequence[Write], on_done: Callable[[WriteResult], None] | None = None
    ) -> list[WriteResult]: ...


@dataclass(frozen=True)
class ChangeResult:
    change: Change
    created: tuple[ObjectRef, ...] = ()
    deleted: tuple[ObjectRef, ...] = ()
    errors: tuple[str, ...] = ()
    patched: tuple[ObjectRef, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass(frozen=True)
class ChangeSet:
    results: tuple[ChangeResult, ...] = ()
    ledger_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.ledger_error is None and all(r.ok for r in self.results)

    @property
    def failed(self) -> tuple[ChangeResult, ...]:
        return tuple(r for r in self.results if not r.ok)

    def for_job(self, key: JobKey) -> ChangeResult | None:
        return next((r for r in self.results if r.change.key == key), None)


@dataclass
class _Outcome:
    created: list[ObjectRef] = field(default_factory=list)
    deleted: list[ObjectRef] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    patched: list[ObjectRef] = field(default_factory=list)


def apply(
    plan: Plan, cluster: WriteAPI, *, on_done: Callable[[WriteResult], None] | None = None
) -> ChangeSet:
    """Run the plan's writes; report per job what was created, deleted and failed.
    `on_done` hears of every write as it finishes (for a progress display)."""
    writing = [c for c in plan.changes if c.writes]
    outcomes: dict[JobKey, _Outcome] = defaultdict(_Outcome)
    owners: dict[ObjectRef, JobKey] = {}
    deletes: list[Write] = []
    firsts: list[Write] = []
    creates: list[Write] = []
    for change in writing:
        for ref in change.deletes:
            owners[ref] = change.key
            deletes.append(Delete(ref))
        for patch in change.patches:
            owners[patch.ref] = change.key
            deletes.append(Patch(patch.ref, patch.patch))
        for obj in change.creates:
            owners[ObjectRef.of(obj)] = change.key
            (firsts if ObjectRef.of(obj) in change.first else creates).append(Create(obj))
    # A job whose old objects could not all be deleted is not started anew, so it
    # never has two live runtimes. (The pods of deleted Jobs may still be terminating
    # while the new ones start: the API server deletes them in the background.)
    blocked = _failed(cluster.write(deletes, on_done), owners, outcomes, Delete)
    first = cluster.write(_unblocked(firsts, owners, blocked), on_done)
    unready = _failed(first, owners, outcomes, Create) - blocked
    _record(
        cluster.write(_unblocked(creates, owners, blocked | unready), on_done), owners, outcomes
    )
    for change in writing:
        if change.key in blocked and change.creates:
            outcomes[change.key].errors.append(
                "not started: its old objects could not all be deleted"
            )
        elif change.key in unready:
            outcomes[change.key].errors.append(
                "not started: what it needs first (its scheduler's Service) was not created"
            )
    return ChangeSet(tuple(_result(c, outcomes[c.key]) for c in writing))


def _failed(
    results: list[WriteResult],
    owners: dict[ObjectRef, JobKey],
    outcomes: dict[JobKey, _Outcome],
    kind: type[Create] | type[Delete],
) -> set[JobKey]:
    """Record `results`; the jobs whose writes of `kind` failed (a failed patch blocks
    nothing: it changes no object's existence)."""
    _record(results, owners, outcomes)
    return {owners[_ref(r.write)] for r in results if r.error and isinstance(r.write, kind)}


def _unblocked(
    writes: list[Write], owners: dict[ObjectRef, JobKey], blocked: set[JobKey]
) -> list[Write]:
    return [w for w in writes if owners[_ref(w)] not in blocked]


def _record(
    results: list[WriteResult], owners: dict[ObjectRef, JobKey], outcomes: dict[JobKey, _Outcome]
) -> None:
    for result in results:
        ref = _ref(result.write)
        outcome = outcomes[owners[ref]]
        if result.error is not None:
            outcome.errors.append(f"{_verb(result.write)} {ref}: {_message(result.error)}")
        elif isinstance(result.write, Create):
            outcome.created.append(ref)
        elif isinstance(result.write, Patch):
            outcome.patched.append(ref)
        else:
            outcome.deleted.append(ref)


def _ref(write: Write) -> ObjectRef:
    return write.ref


def _verb(write: Write) -> str:
    return {Create: "create", Patch: "patch", Delete: "delete"}[type(write)]


def _message(error: MxGitOpsError) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _result(change: Change, outcome: _Outcome) -> ChangeResult:
    return ChangeResult(
        change,
        tuple(outcome.created),
        tuple(outcome.deleted),
        tuple(outcome.errors),
        tuple(outcome.patched),
    )
