"""Planning: diff(desired, live) -> Plan, a pure function.

Given the jobs the repository wants, the objects this instance owns in the
cluster and the ledger of finished jobs, decide one change per job and say
why (the values: `changes.py`). Nothing here performs I/O, so a plan can be printed (`--dry-run`),
tested without a cluster, and handed to `apply.py`, which does exactly what
it says and nothing else.

The GitOps rules live here: unchanged specs write nothing, missing pieces are
repaired, changed specs replace (or wait, if the manifest asks), removed
manifests prune (within the safety limits), invalid manifests protect their
live job, and finished jobs never run again unless their spec changes.

Half-done work and hand edits have their rules too. Leftovers of an
interrupted replace or prune (a Service without its batch Jobs) are no running
job: `on-change: wait` does not hold them, and the replace or prune goes on. A
job with objects that no longer add up (a label moved or removed by hand) is
held, all of it, and the objects are named, until they are put right. And a
scheduler Service is created before the batch Jobs that dial it, which are not
started unless it is ours.

A plan also says how the ledger of finished jobs changes: `bookkeeping.py`
decides that from the plan's changes, each ledger change with a reason. And
which runtimes the ledger records this instance may have objects of once the
plan is applied (`runtimes.in_use`): where the plan creates objects of a runtime
the ledger does not record yet, that record is written before anything is
applied (`Plan.recorded_first`), so no sync skips the LIST that would find them.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime

from mxgitops.bookkeeping import (
    ledger_changes,
    with_changes,
)
from mxgitops.changes import Action, Change, Plan, PlanOptions
from mxgitops.ledger import JobKey, Ledger
from mxgitops.objects import Kind, KubeObject, LiveObjects, ObjectRef
from mxgitops.runpolicy import cleanable, finished_while_suspended, ttl_passed
from mxgitops.runtimes import Live as LiveJob
from mxgitops.runtimes import group_live, in_use, needs_record
from mxgitops.runtimes import refs as job_refs
from mxgitops.runtimes import render as render_job
from mxgitops.spec import ON_CHANGE_ANNOTATION, MxJob, OnChange
from mxgitops.trainer import (
    Failure,
    InPlace,
    MxReplicaStatus,
    RenderContext,
    ReplicaState,
    State,
)
from mxgitops.words import counted

FINISHED = (State.SUCCEEDED, State.FAILED)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Planning keeps what it makes until the plan is done, and makes no reference cycle
    (tests/test_plan_scale.py checks), so the cyclic collector finds nothing to free. Left
    on, the plan's allocations set off collections that walk every live object of the
    LIST too, hundreds of thousands at 10,000 jobs: they took a third of a no-op plan,
    and made it grow faster than the jobs. Reference counting frees what is dropped."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@_collector_paused()
def plan(
    desired: Sequence[MxJob],
    live: LiveObjects,
    ledger: Ledger,
    options: PlanOptions,
    *,
    invalid: frozenset[JobKey] = frozenset(),
    unnamed_invalid: int = 0,
    held: Sequence[tuple[MxJob, str]] = (),
) -> Plan:
    """One change per job known to the repository, the cluster or both.

    `invalid` names the jobs whose manifests are invalid; `unnamed_invalid`
    counts invalid manifests whose job cannot even be named, which might be
    any live job, so no job is pruned while there are any. `held` are valid jobs
    the policy forbids, each with why: neither created nor changed.
    """
    live_jobs = group_live(live)
    ctx = options.render_context()
    now = options.now or datetime.now().astimezone()
    changes = [_desired_change(job, live_jobs.get(job.key), ledger, ctx, now) for job in desired]
    changes += [_policy_hold(job, why, live_jobs.get(job.key)) for job, why in held]
    wanted = {job.key for job in desired} | {job.key for job, _ in held}
    orphans = [live_jobs[key] for key in sorted(live_jobs) if key not in wanted]
    changes += _orphan_changes(orphans, invalid, options)
    refused = _prune_refusal(
        changes, len(live_jobs), len(desired) + len(held), unnamed_invalid, options
    )
    if refused:
        changes = [_hold_delete(c, refused) if c.action is Action.DELETE else c for c in changes]
    book = ledger_changes(
        ledger,
        [c for c in changes if c.action is not Action.DELETE],
        pruned={c.key for c in changes if c.action is Action.DELETE},
        invalid=invalid,
        live_jobs=live_jobs,
        now=now,
        retention=options.ledger_retention,
    )
    # Shown as Deleting once the ledger has judged them by the state they were in.
    changes = [
        replace(c, state=State.DELETING, failure=None) if c.action is Action.DELETE else c
        for c in changes
    ]
    runtimes = in_use(live, (o for c in changes for o in c.creates), ledger.runtimes)
    first = tuple(sorted(c.key for c in changes if needs_record(c.creates, ledger.runtimes)))
    return Plan(
        tuple(sorted(changes, key=lambda c: c.key)),
        with_changes(ledger, book).with_runtimes(runtimes),
        bool(book) or runtimes != ledger.runtimes,
        refused,
        book,
        ledger.with_runtimes(runtimes) if first else None,
        first,
    )


def _desired_change(
    job: MxJob, live: LiveJob | None, ledger: Ledger, ctx: RenderContext, now: datetime
) -> Change:
    base = _Base(job.namespace, job.name, job.spec_hash, job.source_path)
    if live is not None and live.strays:
        return _left_alone(base, live)
    # A job finished before an upgrade that changed the hash (the in-place fields left
    # it; the rendering joined it) is recorded, and its objects labelled, under the hash
    # it had then.
    finished = ledger.finished(job.key, job.spec_hash) or next(
        (f for h in job.earlier_spec_hashes if (f := ledger.finished(job.key, h))), None
    )
    recorded = Failure.from_json(finished.failure) if finished and finished.failure else None
    if finished is not None and live is not None and not live.has_objects:
        live = None  # only pods are left (Jobs deleted with orphan propagation): not a new spec
    if live is None:
        if finished is not None:
            return replace(base, runtime_id=job.runtime_id, failure=recorded).change(
                Action.UNCHANGED, _finished_reason(finished.state), state=State(finished.state)
            )
        return _starting(base, job).change(
            Action.CREATE, "new job", state=State.PENDING, creates=tuple(render_job(job, ctx))
        )
    state, replicas = live.status()
    if finished is not None:
        state = State(finished.state)
    base = _Base(
        job.namespace,
        job.name,
        job.spec_hash,
        job.source_path,
        tuple(replicas),
        live.runtime_id or "",
        recorded or (live.failure() if state is State.FAILED else None),
        live.commit or "",
        live.placement(),
        live.unreachable(),
    )
    # Finished under the hash it had before the upgrade: the same job, never run again.
    legacy = state in FINISHED and live.spec_hash in job.earlier_spec_hashes
    if live.spec_hash != job.spec_hash and not legacy:
        return _changed_spec(job, live, state, ctx, base)
    if state in FINISHED:
        return _finished_change(job, live, state, base, ttl_passed(job, finished, now))
    return _running_change(job, live, state, ctx, base)


def _policy_hold(job: MxJob, why: str, live: LiveJob | None) -> Change:
    """A job the policy forbids: nothing of it is written. Its live objects (of an
    earlier, allowed spec, or from before the policy) stay as they are: deleting them
    would let a pull request stop a running job by breaking the policy."""
    base = _Base(job.namespace, job.name, job.spec_hash, job.source_path)
    if live is None:
        return base.change(Action.HOLD, f"not created: the policy forbids it ({why})")
    state, replicas = live.status()
    return replace(base, replicas=tuple(replicas)).change(
        Action.HOLD,
        f"not changed: the policy forbids its manifest ({why}); its live objects are "
        "left as they are",
        state=state,
    )


def _running_change(
    job: MxJob, live: LiveJob, state: State, ctx: RenderContext, base: _Base
) -> Change:
    """Self-heal: recreate what is missing of a running job, and patch in place what
    a live Job lets change (suspend, deadlines, backoff, TTL, the on-change annotation):
    an update when the manifest changed it, a repair when a hand changed it.

    Earlier versions set ttlSecondsAfterFinished on each batch Job (it is job-wide
    now, `runpolicy.ttl_passed`), so Kubernetes may have deleted one of theirs once
    its replica finished, while the others still run (`incomplete` says when the TTL
    explains it); recreating it would run that replica again, so only a missing
    Service is recreated then.
    """
    disruption = live.disruption()
    if disruption is not None:
        return _run_again(job, live, ctx, base, disruption.describe())
    missing = {ref for ref in job_refs(job) if not live.has(ref)}
    collected = []
    if job.run_policy.ttl_seconds_after_finished is not None and live.incomplete() is None:
        collected = [ref for ref in missing if ref.kind is Kind.JOB]
        missing -= set(collected)
    patches = tuple(live.compare_in_place(job))
    finished = finished_while_suspended(job, live)
    if finished:
        change = base.change(
            Action.REPAIR,
            f"suspended after replicas finished: {counted(len(finished), 'object')} made "
            "anew, suspended, so that it is resumed whole (a ps-lite job waits for every one "
            "of its replicas)" + _patched(patches),
            state=state,
            deletes=finished,
            creates=tuple(o for o in render_job(job, ctx) if ObjectRef.of(o) in finished),
            patches=tuple(p for p in patches if p.ref not in finished),
        )
        return replace(change, starts_after_deletes=True)  # the same names: once gone
    if missing:
        names = ", ".join(sorted(ref.name for ref in missing))
        return base.change(
            Action.REPAIR,
            f"{len(missing)} of its objects are missing: {names}" + _patched(patches),
            # No replica has anything that runs (a first sync killed after the batch
            # runtime's Service): they are made now, as by a create.
            state=State.PENDING if _none_made(base.replicas) else state,
            creates=tuple(o for o in render_job(job, ctx) if ObjectRef.of(o) in missing),
            patches=patches,
        )
    if patches:
        drift = all(p.drift for p in patches)
        return base.change(
            Action.REPAIR if drift else Action.UPDATE,
            ("edited by hand, set back in place: " if drift else "changed in place: ")
            + _fields(patches),
            state=state,
            patches=patches,
        )
    if collected:
        return base.change(
            Action.UNCHANGED,
            f"in sync; {len(collected)} batch Jobs finished and were removed by "
            "ttlSecondsAfterFinished, and are not run again",
            state=state,
        )
    return base.change(Action.UNCHANGED, "in sync", state=state)


def _run_again(job: MxJob, live: LiveJob, ctx: RenderContext, base: _Base, what: str) -> Change:
    """A dist job Kubernetes disrupted runs again whole: every replica is deleted, and
    made anew once they are gone (a replace, under the same names). A lone new worker
    or server cannot rejoin a running ps-lite job. Not a failure, so nothing counts it
    against backoffLimit: the new batch Jobs start with no failure counted."""
    change = _starting(base, job).change(
        Action.REPLACE,
        f"disrupted, not failed: {what}; the job runs again whole (a disruption is not "
        "counted against backoffLimit)",
        state=State.PENDING,
        deletes=tuple(live.refs()),
        creates=tuple(render_job(job, ctx)),
    )
    return replace(change, starts_after_deletes=True)


def _fields(patches: Sequence[InPlace]) -> str:
    """What moved, once per distinct change (every batch Job of a job moves alike)."""
    moved = dict.fromkeys(f for p in patches for f in p.fields)
    return f"{', '.join(moved)} ({len(patches)} objects, no restart)"


def _patched(patches: Sequence[InPlace]) -> str:
    return f"; in place: {_fields(patches)}" if patches else ""


@dataclass(frozen=True)
class _Base:
    """What every change of one job shares; `change` fills in the rest."""

    namespace: str
    name: str
    spec_hash: str | None
    source: str
    replicas: tuple[MxReplicaStatus, ...] = ()
    runtime_id: str = ""
    failure: Failure | None = None
    commit: str = ""
    placement: str = ""
    unreachable: str = ""

    def change(
        self,
        action: Action,
        reason: str,
        *,
        state: State | None = None,
        creates: tuple[KubeObject, ...] = (),
        deletes: tuple[ObjectRef, ...] = (),
        patches: tuple[InPlace, ...] = (),
    ) -> Change:
        return Change(
            self.namespace,
            self.name,
            action,
            reason,
            state,
            self.spec_hash,
            self.source,
            self.replicas,
            creates,
            deletes,
            self.runtime_id,
            self.failure if state is State.FAILED else None,
            patches,
            self.commit,
            placement=self.placement,
            unreachable=self.unreachable,
        )


def _starting(base: _Base, job: MxJob) -> _Base:
    """A job just (re)started: running, by the seed's rules, with no replica reported
    yet, exactly as the next sync will read it back before pods appear."""
    pending = tuple(
        MxReplicaStatus(r.type, ReplicaState.PENDING, {ReplicaState.PENDING: r.replicas})
        for r in job.replica_specs
    )
    return replace(base, replicas=pending, runtime_id=job.runtime_id, failure=None)


def _none_made(replicas: Sequence[MxReplicaStatus]) -> bool:
    return bool(replicas) and all(r.state is ReplicaState.UNKNOWN for r in replicas)


def _finished_reason(state: str) -> str:
    return f"{state.lower()}; a finished job runs again only when its spec changes"


def _changed_spec(
    job: MxJob, live: LiveJob, state: State, ctx: RenderContext, base: _Base
) -> Change:
    """Replace: the objects of other specs go, those of this one that are missing come.

    A job waits (on-change: wait) only while it is a whole runtime of another spec
    that has not finished. Leftovers of an interrupted replace or prune, and a
    replace under way (objects of this spec exist), are no running job.
    """
    leftover = live.incomplete()
    current = set(live.refs_of(job.spec_hash))
    waits = state not in FINISHED and job.on_change is OnChange.WAIT
    if waits and leftover is None and not current:
        return _waiting(base, state, "spec changed; replaced")
    runtimes = f"runtime {live.runtime_id or 'mixed'} -> {job.runtime_id}"
    reason = f"spec changed; replace under way ({runtimes})"
    if current:
        reason = f"finishing an interrupted replace (runtime -> {job.runtime_id})"
    elif waits and leftover is not None:
        reason += f"; not held: {leftover}, which is no running job"
    # The row shows the new runtime, starting: the old one's replicas are going.
    change = _starting(base, job).change(
        Action.REPLACE,
        reason,
        state=State.PENDING,
        deletes=tuple(ref for ref in live.refs() if ref not in current),
        creates=tuple(o for o in render_job(job, ctx) if ObjectRef.of(o) not in current),
    )
    return replace(change, starts_after_deletes=bool(change.deletes))


def _left_alone(base: _Base, live: LiveJob, why: str = "") -> Change:
    """Objects whose name, labels and spec hash disagree were edited by hand. Nothing of
    their job is written until they add up again or are deleted: acting on a guess would
    restart the wrong job, or create again, every sync, what exists."""
    state, replicas = live.status()
    strays = "; ".join(str(s) for s in live.strays)
    return replace(base, replicas=tuple(replicas)).change(
        Action.HOLD,
        f"{why}objects that do not add up are left alone: {strays}; restore their labels "
        "and annotations, or delete them",
        state=state,
    )


def _finished_change(
    job: MxJob, live: LiveJob, state: State, base: _Base, ttl_passed: str | None
) -> Change:
    """A finished job holds nothing: batch Jobs still active (a replica that keeps
    restarting under OnFailure, workers of a dist job whose scheduler is done) are
    deleted, with their pods, in the sync that sees it finished; cleanPodPolicy may
    remove more, and `ttl_passed` (why its TTL has run out) all of it. Why it failed
    was read from those pods first (`Change.failure`)."""
    if ttl_passed is not None:
        return base.change(
            Action.CLEAN,
            f"{state.lower()}; {ttl_passed}: its {len(live.refs())} objects are removed, and "
            "it does not run again",
            state=state,
            deletes=tuple(live.refs()),
        )
    policy = job.run_policy.clean_pod_policy
    doomed = cleanable(live, policy)
    if doomed:
        return base.change(
            Action.CLEAN,
            f"{state.lower()}; cleanPodPolicy {policy} removes {len(doomed)} of its objects",
            state=state,
            deletes=doomed,
        )
    active = tuple(live.unfinished_job_refs())
    if active:
        return base.change(
            Action.STOP,
            f"{state.lower()}; its {len(active)} batch Jobs still active are stopped "
            "(deleted with their pods): a finished job holds nothing",
            state=state,
            deletes=active,
        )
    return base.change(Action.UNCHANGED, _finished_reason(state), state=state)


def _orphan_changes(
    orphans: Sequence[LiveJob], invalid: frozenset[JobKey], options: PlanOptions
) -> list[Change]:
    changes = []
    for live in orphans:
        state, replicas = live.status()
        base = _Base(
            live.namespace,
            live.name,
            live.spec_hash,
            live.source or "",
            tuple(replicas),
            live.runtime_id or "",
            live.failure() if state is State.FAILED else None,
            live.commit or "",
            live.placement(),
            live.unreachable(),
        )
        if live.key in invalid:
            change = base.change(
                Action.HOLD, "its manifest is invalid; the live job is left as is", state=state
            )
        elif live.strays:
            change = _left_alone(base, live, "manifest removed; ")
        elif not options.prune:
            change = base.change(Action.HOLD, "manifest removed; pruning is off", state=state)
        else:
            change = _prune(base, live, state, "/".join(live.key) in options.cancel)
        changes.append(change)
    return changes


def _prune(base: _Base, live: LiveJob, state: State, cancelled: bool = False) -> Change:
    """Delete a job whose manifest is gone, unless it runs and asks to finish first;
    leftovers of an interrupted replace or prune are no running job. The repository
    cancels the wait in the same change as the removal by naming the job in its
    `.mxgitops.yaml` `cancel` list."""
    leftover = live.incomplete()
    waits = state not in FINISHED and _on_change(live) is OnChange.WAIT
    reason = "manifest removed"
    if waits and cancelled:
        reason += "; on-change: wait cancelled (.mxgitops.yaml cancel)"
    elif waits and leftover is None:
        return _waiting(base, state, "manifest removed; removed")
    elif waits:
        reason += f"; not held: {leftover}, which is no running job"
    return base.change(Action.DELETE, reason, state=state, deletes=tuple(live.refs()))


def _waiting(base: _Base, state: State, what: str) -> Change:
    """Held, as the job's on-change annotation asks: `what` happens once it has finished."""
    return base.change(
        Action.HOLD,
        f"{what} when the {state.lower()} job finishes ({ON_CHANGE_ANNOTATION}: wait)",
        state=State.WAITING,
    )


def _on_change(live: LiveJob) -> OnChange:
    return live.on_change()


def _prune_refusal(
    changes: Sequence[Change],
    live_count: int,
    desired_count: int,
    unnamed_invalid: int,
    options: PlanOptions,
) -> str | None:
    deleting = sum(1 for c in changes if c.action is Action.DELETE)
    if not deleting or options.force_prune:
        return None
    if unnamed_invalid:
        return (
            f"{counted(unnamed_invalid, 'invalid manifest')} "
            f"{'names' if unnamed_invalid == 1 else 'name'} no job, and any of them may be "
            "the manifest of a job that would be pruned; fix them first"
        )
    if desired_count == 0:
        return (
            f"no valid manifest was found but {counted(live_count, 'live job')} "
            f"{'exists' if live_count == 1 else 'exist'}; refusing to prune them all (use "
            "--force-prune if that is really wanted)"
        )
    share = deleting / live_count
    if share > options.max_prune_share:
        return (
            f"{deleting} of {live_count} live jobs ({share:.0%}) would be pruned, more than "
            f"the allowed {options.max_prune_share:.0%}; raise --max-prune-share or use "
            "--force-prune"
        )
    return None


def _hold_delete(change: Change, why: str) -> Change:
    return replace(change, action=Action.HOLD, reason=f"manifest removed; {why}", deletes=())
