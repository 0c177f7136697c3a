"""Apply: execute a Plan against the cluster, and nothing the plan does not say.

Deletions run first, together with in-place patches (`Change.patches`:
independent of anything else). A replace (`Change.starts_after_deletes`)
deletes in the foreground and its creates wait, within `OLD_RUNTIME_WAIT`,
until the old objects are gone with their pods; a replace whose old pods are
still terminating then is not started by this sync (`ChangeResult.waiting`)
and the next sync, which finds them being deleted, starts it. Then the
creations a change needs first (`Change.first`), then the others, each phase
with the cluster's bounded parallelism.
A failed write does not stop the others: the change set records, per job,
what was done and what failed, so a partial apply is reported honestly and
the next sync finishes the work (every write is idempotent). A refused write
is one line of its job's errors, the API's message and what it cost the job
(not started) together.

A write can succeed with warnings (the response's `Warning` headers): they
are kept with the job's result. One kind is an error: Pod Security admission
accepts a batch Job whose pod template its namespace's level forbids, only
warning (`would violate PodSecurity ...`), and refuses its pods later; such a
job never starts, so it gets one error line, the API's warning.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple, Protocol

from mxgitops.errors import MxGitOpsError
from mxgitops.objects import Create, Delete, ObjectRef, Patch, Write, WriteResult
from mxgitops.planning.changes import Change, Plan
from mxgitops.planning.ledger import JobKey


class WriteAPI(Protocol):
    def write(
        self, writes: Sequence[Write], on_done: Callable[[WriteResult], None] | None = None
    ) -> list[WriteResult]:
        """One result per write, in the order of `writes`."""
        ...

    def wait_gone(
        self, refs: Sequence[ObjectRef], *, timeout: float, tick: Callable[[], None]
    ) -> list[ObjectRef]:
        """Those of `refs` still there after waiting up to `timeout` seconds for them
        to be deleted; `tick` is called while waiting."""
        ...


@dataclass(frozen=True)
class ChangeResult:
    change: Change
    created: tuple[ObjectRef, ...] = ()
    deleted: tuple[ObjectRef, ...] = ()
    errors: tuple[str, ...] = ()
    patched: tuple[ObjectRef, ...] = ()
    warnings: tuple[str, ...] = ()  # of its successful writes, but Pod Security's (errors)
    waiting: str = ""  # why its creates were left for the next sync (not an error)

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
    warnings: list[str] = field(default_factory=list)
    refused_pods: list[str] = field(default_factory=list)  # Pod Security's warnings
    waiting: str = ""


# How long a sync waits for a replaced runtime's pods to stop (their grace period is
# 30 s by default) before it leaves the new runtime's start to the next sync.
OLD_RUNTIME_WAIT = 120.0
WAITING_FOR_OLD_PODS = "waiting for the old runtime's pods to go; the next sync starts it"


def apply(
    plan: Plan,
    cluster: WriteAPI,
    *,
    on_done: Callable[[WriteResult], None] | None = None,
    while_waiting: Callable[[], None] = lambda: None,
    refused: Mapping[JobKey, str] = MappingProxyType({}),
) -> ChangeSet:
    """Run the plan's writes; report per job what was created, deleted and failed.
    `on_done` hears of every write as it finishes (for a progress display);
    `while_waiting` is called while a replace waits for its old runtime's pods. The
    jobs in `refused` are not written at all: each has its one error, why."""
    writing = [c for c in plan.changes if c.writes]
    outcomes: dict[JobKey, _Outcome] = defaultdict(_Outcome)
    for key, why in refused.items():
        outcomes[key].errors.append(why)
    writing_now = [c for c in writing if c.key not in refused]
    deletes: list[_Write] = []
    firsts: list[_Write] = []
    creates: list[_Write] = []
    for change in writing_now:
        foreground = change.starts_after_deletes
        deletes += (_Write(Delete(ref, foreground), ref, change.key) for ref in change.deletes)
        deletes += (_Write(Patch(p.ref, p.patch), p.ref, change.key) for p in change.patches)
        goes_first = set(change.first)  # worked out once per job, not once per object
        for obj in change.creates:
            ref = ObjectRef.of(obj)
            (firsts if ref in goes_first else creates).append(_Write(Create(obj), ref, change.key))
    # A job whose old objects could not all be deleted, or are not gone yet with their
    # pods, is not started anew, so it never has two live runtimes.
    starting = {c.key for c in writing_now if c.creates}
    deleted = _run(cluster, deletes, on_done)
    blocked = _failed(deleted, outcomes, Delete, starting, NOT_STARTED_ANEW)
    blocked |= _still_going(writing_now, blocked, cluster, outcomes, while_waiting)
    first = _run(cluster, _unblocked(firsts, blocked), on_done)
    unready = _failed(first, outcomes, Create, starting, NOT_STARTED) - blocked
    _record(_run(cluster, _unblocked(creates, blocked | unready), on_done), outcomes)
    return ChangeSet(tuple(_result(c, outcomes[c.key]) for c in writing))


def _still_going(
    writing: list[Change],
    blocked: set[JobKey],
    cluster: WriteAPI,
    outcomes: dict[JobKey, _Outcome],
    while_waiting: Callable[[], None],
) -> set[JobKey]:
    """The replaces whose old objects (with their pods) are not gone within the wait."""
    waiting = [c for c in writing if c.starts_after_deletes and c.creates and c.key not in blocked]
    if not waiting:
        return set()
    doomed = [ref for change in waiting for ref in change.deletes]
    left = set(cluster.wait_gone(doomed, timeout=OLD_RUNTIME_WAIT, tick=while_waiting))
    going = {c.key for c in waiting if left.intersection(c.deletes)}
    for key in going:
        outcomes[key].waiting = WAITING_FOR_OLD_PODS
    return going


class _Write(NamedTuple):
    """A write of the plan with the object it addresses and the job it is for, worked
    out once: a Create's `ref` is derived from its object anew at every use, and a
    first sync writes thousands of objects (docs/development: measurements)."""

    write: Write
    ref: ObjectRef
    owner: JobKey


def _run(
    cluster: WriteAPI, writes: list[_Write], on_done: Callable[[WriteResult], None] | None
) -> list[tuple[_Write, WriteResult]]:
    """Each write with its result."""
    results = cluster.write([w.write for w in writes], on_done)
    return list(zip(writes, results, strict=True))


# What a refused write costs its job, said on the write's own line.
NOT_STARTED_ANEW = "not started anew: its old objects could not all be deleted"
NOT_STARTED = "not started: its batch Jobs need this first"


def _failed(
    results: list[tuple[_Write, WriteResult]],
    outcomes: dict[JobKey, _Outcome],
    kind: type[Create] | type[Delete],
    starting: set[JobKey],
    consequence: str,
) -> set[JobKey]:
    """Record `results`; the jobs whose writes of `kind` failed (a failed patch blocks
    nothing: it changes no object's existence). The first such line of a job that was
    to start says that it was not, and why."""
    failed: set[JobKey] = set()
    for planned, result in results:
        key = planned.owner
        if result.error is None or not isinstance(result.write, kind) or key in failed:
            _record([(planned, result)], outcomes)
            continue
        failed.add(key)
        note = f"; {consequence}" if key in starting else ""
        outcomes[key].errors.append(_refused(result, planned.ref) + note)
    return failed


def _unblocked(writes: list[_Write], blocked: set[JobKey]) -> list[_Write]:
    return [w for w in writes if w.owner not in blocked]


def _record(results: list[tuple[_Write, WriteResult]], outcomes: dict[JobKey, _Outcome]) -> None:
    for (_, ref, owner), result in results:
        outcome = outcomes[owner]
        if result.error is not None:
            outcome.errors.append(_refused(result, ref))
            continue
        for warning in result.warnings:
            said = f"{_verb(result.write)} {ref}: {warning}"
            (outcome.refused_pods if _POD_SECURITY in warning else outcome.warnings).append(said)
        if isinstance(result.write, Create):
            outcome.created.append(ref)
        elif isinstance(result.write, Patch):
            outcome.patched.append(ref)
        else:
            outcome.deleted.append(ref)


# How kube-apiserver's PodSecurity admission begins the warning on a workload whose pod
# template its namespace's enforced level forbids.
_POD_SECURITY = "would violate PodSecurity"


def _refused(result: WriteResult, ref: ObjectRef) -> str:
    assert result.error is not None
    return f"{_verb(result.write)} {ref}: {_message(result.error)}"


def _pods_refused(said: list[str]) -> list[str]:
    """One line for a job whose batch Jobs' pods Pod Security admission will refuse."""
    if not said:
        return []
    more = f" (and {len(said) - 1} more of its batch Jobs)" if len(said) > 1 else ""
    return [f"{said[0]}{more}; its pods will be refused, so it will not start"]


def _verb(write: Write) -> str:
    return {Create: "create", Patch: "patch", Delete: "delete"}[type(write)]


def _message(error: MxGitOpsError) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _result(change: Change, outcome: _Outcome) -> ChangeResult:
    return ChangeResult(
        change,
        tuple(outcome.created),
        tuple(outcome.deleted),
        (*outcome.errors, *_pods_refused(outcome.refused_pods)),
        tuple(outcome.patched),
        tuple(dict.fromkeys(outcome.warnings)),
        outcome.waiting,
    )
