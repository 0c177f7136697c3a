"""Planning: diff(desired, live) -> Plan, a pure function.

Given the jobs the repository wants, the objects this instance owns in the
cluster and the ledger of finished jobs, decide one change per job and say
why (the values: `changes.py`). Nothing here performs I/O, so a plan can be printed (`--dry-run`),
tested without a cluster, and handed to `apply.py`, which does exactly what
it says and nothing else.

The GitOps rules live here: unchanged specs write nothing, missing pieces are
repaired, changed specs replace (or wait, if the manifest asks), removed
manifests prune (within the safety limits: `pruning.py`), invalid manifests protect
their live job, and finished jobs never run again unless their spec changes. What
every change of one job shares is `planbase.py`'s.

A finished job is recorded per run: the ledger's entry says which spec finished, the
live objects which run they are (`bookkeeping.recorded_run`). A commit that names again
a spec recorded finished while another spec's run is live (a revert) starts nothing: the
run Git no longer names runs to its end under `on-change: wait`, or is stopped, and
nothing starts after it. A run of a recorded spec made after the record is read from its
own objects, so the record's TTL never acts on it.

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
from dataclasses import replace
from datetime import datetime

from mxgitops.model import ON_CHANGE_ANNOTATION, MxJob, OnChange
from mxgitops.objects import Kind, LiveObjects, ObjectRef
from mxgitops.planning.bookkeeping import kept_record, ledger_changes, recorded_run, with_changes
from mxgitops.planning.changes import Action, Change, Plan, PlanOptions
from mxgitops.planning.ledger import Finished, JobKey, Ledger
from mxgitops.planning.planbase import (
    FINISHED,
    ChangeBase,
    finished_reason,
    left_alone,
    none_made,
    starting,
    waiting,
)
from mxgitops.planning.pruning import hold_delete, orphan_changes, prune_refusal
from mxgitops.planning.runpolicy import (
    cleanable,
    disrupted_too_often,
    finished_while_suspended,
    ttl_passed,
)
from mxgitops.runtimes.registry import group_live, in_use, needs_record
from mxgitops.runtimes.registry import refs as job_refs
from mxgitops.runtimes.registry import render as render_job
from mxgitops.runtimes.shared.base import Live as LiveJob
from mxgitops.runtimes.shared.failure import Failure
from mxgitops.runtimes.shared.inplace import InPlace
from mxgitops.runtimes.shared.podtemplate import RenderContext
from mxgitops.runtimes.shared.reruns import with_disruptions
from mxgitops.runtimes.shared.state import State
from mxgitops.words import counted


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Planning keeps what it makes until the plan is done, and makes no reference cycle
    (tests/test_plan_scale.py checks), so the cyclic collector finds nothing to free. Left
    on, the plan's allocations set off collections that walk every live object of the
    LIST too, hundreds of thousands at 10,000 jobs, to free nothing: a cost that grows
    faster than the jobs (docs/development: measurements). Reference counting frees
    what is dropped."""
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
    runs = options.max_disruption_runs
    changes = [
        _desired_change(job, live_jobs.get(job.key), ledger, ctx, now, runs) for job in desired
    ]
    standing = frozenset(
        job.key for job in desired if _stands_over(_finished_record(job, ledger), live_jobs)
    )
    changes += [_policy_hold(job, why, live_jobs.get(job.key)) for job, why in held]
    wanted = {job.key for job in desired} | {job.key for job, _ in held}
    orphans = [live_jobs[key] for key in sorted(live_jobs) if key not in wanted]
    changes += orphan_changes(orphans, invalid, options)
    refused = prune_refusal(
        changes, len(live_jobs), len(desired) + len(held), unnamed_invalid, options
    )
    if refused:
        changes = [hold_delete(c, refused) if c.action is Action.DELETE else c for c in changes]
    book = ledger_changes(
        ledger,
        [c for c in changes if c.action is not Action.DELETE],
        pruned={c.key for c in changes if c.action is Action.DELETE},
        invalid=invalid,
        live_jobs=live_jobs,
        now=now,
        retention=options.ledger_retention,
        standing=standing,
    )
    # Shown as Deleting once the ledger has judged them by the state they were in.
    changes = [
        replace(c, state=State.DELETING, failure=None) if c.action is Action.DELETE else c
        for c in changes
    ]
    changes = [_with_kept_record(c, ledger) for c in changes]
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


def _with_kept_record(change: Change, ledger: Ledger) -> Change:
    """A finished job's change carries the record the ledger keeps of its run: the
    outputs show what it reached after its pods, and the logs, are gone."""
    if change.record is not None or change.state not in FINISHED:
        return change
    kept = kept_record(ledger.entries.get(change.key), change.spec_hash)
    return change if kept is None else replace(change, record=kept)


def _desired_change(
    job: MxJob,
    live: LiveJob | None,
    ledger: Ledger,
    ctx: RenderContext,
    now: datetime,
    max_runs: int,
) -> Change:
    base = ChangeBase(job.namespace, job.name, job.spec_hash, job.source_path)
    if live is not None and live.strays:
        return left_alone(base, live)
    finished = _finished_record(job, ledger)
    recorded = Failure.from_json(finished.failure) if finished and finished.failure else None
    if finished is not None and live is not None and not live.has_objects:
        live = None  # only pods are left (Jobs deleted with orphan propagation): not a new spec
    if live is None:
        if finished is not None:
            return replace(base, runtime_id=job.runtime_id, failure=recorded).change(
                Action.UNCHANGED, finished_reason(finished.state), state=State(finished.state)
            )
        return starting(base, job).change(
            Action.CREATE, "new job", state=State.PENDING, creates=tuple(render_job(job, ctx))
        )
    if finished is not None and not recorded_run(finished, live):
        if live.spec_hash != finished.spec_hash:
            return _named_again(job, live, finished, recorded, base)
        finished = recorded = None  # a later run of the spec: its objects say how it is
    state, replicas = live.status()
    if finished is not None:
        state = State(finished.state)
    base = ChangeBase(
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
    return _running_change(job, live, state, ctx, base, max_runs)


def _finished_record(job: MxJob, ledger: Ledger) -> Finished | None:
    """The ledger's record of the job's spec finished. A job finished before an upgrade
    that changed the hash (the in-place fields left it; the rendering joined it) is
    recorded, and its objects labelled, under the hash it had then."""
    return ledger.finished(job.key, job.spec_hash) or next(
        (f for h in job.earlier_spec_hashes if (f := ledger.finished(job.key, h))), None
    )


def _stands_over(finished: Finished | None, live_jobs: dict[JobKey, LiveJob]) -> bool:
    """Whether the record of the spec Git names stands over live objects of another spec
    (`_named_again`): nothing seen on them may take its place in the ledger."""
    if finished is None:
        return False
    live = live_jobs.get(finished.key)
    return live is not None and live.has_objects and live.spec_hash != finished.spec_hash


_MAX_STAMP = 40  # an RFC 3339 time, as the ledger writes them, fits


def _named_again(
    job: MxJob, live: LiveJob, finished: Finished, recorded: Failure | None, base: ChangeBase
) -> Change:
    """Git names a spec the ledger records finished, while the live objects are of another
    spec: a commit reverted the job to it, say, while the spec in between runs. The
    finished spec does not run again. The other run is no longer wanted by Git: under
    `on-change: wait` it runs to its end, else (or once it has ended, or when its objects
    are leftovers, no whole run) its objects are deleted; and nothing starts after it."""
    state, replicas = live.status()
    stamp = finished.finished_at  # the ledger's, which a hand may have edited: bounded
    when = stamp if len(stamp) <= _MAX_STAMP and stamp.isprintable() else "a time unreadable"
    named = (
        f"spec changed back to runtime {job.runtime_id}, which {finished.state.lower()} at "
        f"{when}: a finished job does not run again (to run it again, change its spec)"
    )
    other = f"runtime {live.runtime_id or 'mixed'}, of a spec Git no longer names,"
    leftover = live.incomplete()
    if state not in FINISHED and leftover is None and job.on_change is OnChange.WAIT:
        held = replace(
            base,
            replicas=tuple(replicas),
            runtime_id=live.runtime_id or "",
            commit=live.commit or "",
            placement=live.placement(),
            unreachable=live.unreachable(),
        )
        return held.change(
            Action.HOLD,
            f"{named}; {other} runs to its end ({ON_CHANGE_ANNOTATION}: wait), and nothing "
            "starts after it",
            state=State.WAITING,  # as any change held by on-change: wait (`waiting`)
        )
    if leftover is not None:
        how = f"is removed ({leftover}, no running job)"
    elif state in FINISHED:
        how = f"{state.lower()}: its objects are removed"
    else:
        how = "is stopped (deleted with its pods)"
    done = replace(base, runtime_id=job.runtime_id, failure=recorded)
    return done.change(
        Action.STOP,
        f"{named}; {other} {how}, and nothing starts after it",
        state=State(finished.state),
        deletes=tuple(live.refs()),
    )


def _policy_hold(job: MxJob, why: str, live: LiveJob | None) -> Change:
    """A job the policy forbids: nothing of it is written. Its live objects (of an
    earlier, allowed spec, or from before the policy) stay as they are: deleting them
    would let a pull request stop a running job by breaking the policy."""
    base = ChangeBase(job.namespace, job.name, job.spec_hash, job.source_path)
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
    job: MxJob, live: LiveJob, state: State, ctx: RenderContext, base: ChangeBase, max_runs: int
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
    disruption, earlier = live.disruption(), live.disruptions()
    too_often = disrupted_too_often(earlier, disruption, max_runs)
    if too_often is not None:
        active = tuple(live.unfinished_job_refs())
        return replace(base, failure=too_often).change(
            Action.STOP,
            f"failed: disrupted {len(earlier) + (disruption is not None)} times in a row, "
            f"more than --max-disruption-runs {max_runs} allows; its {len(active)} "
            "objects still active are stopped",
            state=State.FAILED,
            deletes=active,
        )
    if disruption is not None:
        return _run_again(job, live, ctx, base, disruption.describe(), earlier, max_runs)
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
            state=State.PENDING if none_made(base.replicas) else state,
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


def _run_again(
    job: MxJob,
    live: LiveJob,
    ctx: RenderContext,
    base: ChangeBase,
    what: str,
    earlier: Sequence[str],
    max_runs: int,
) -> Change:
    """A dist job Kubernetes disrupted runs again whole: every replica is deleted, and
    made anew once they are gone (a replace, under the same names). A lone new worker
    or server cannot rejoin a running ps-lite job. Not a failure, so nothing counts it
    against backoffLimit: the new batch Jobs start with no failure counted. They record
    the disruptions so far, which `--max-disruption-runs` bounds (`runtime/reruns.py`)."""
    change = starting(base, job).change(
        Action.REPLACE,
        f"disrupted, not failed: {what}; the job runs again whole (run again "
        f"{len(earlier) + 1} of at most {max_runs} times in a row; a disruption is not "
        "counted against backoffLimit)",
        state=State.PENDING,
        deletes=tuple(live.refs()),
        creates=with_disruptions(render_job(job, ctx), [*earlier, what]),
    )
    return replace(change, starts_after_deletes=True)


def _fields(patches: Sequence[InPlace]) -> str:
    """What moved, once per distinct change (every batch Job of a job moves alike)."""
    moved = dict.fromkeys(f for p in patches for f in p.fields)
    return f"{', '.join(moved)} ({len(patches)} objects, no restart)"


def _patched(patches: Sequence[InPlace]) -> str:
    return f"; in place: {_fields(patches)}" if patches else ""


def _changed_spec(
    job: MxJob, live: LiveJob, state: State, ctx: RenderContext, base: ChangeBase
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
        return waiting(base, state, "spec changed; replaced")
    runtimes = f"runtime {live.runtime_id or 'mixed'} -> {job.runtime_id}"
    reason = f"spec changed; replace under way ({runtimes})"
    if current:
        reason = f"finishing an interrupted replace (runtime -> {job.runtime_id})"
    elif waits and leftover is not None:
        reason += f"; not held: {leftover}, which is no running job"
    # The row shows the new runtime, starting: the old one's replicas are going.
    change = starting(base, job).change(
        Action.REPLACE,
        reason,
        state=State.PENDING,
        deletes=tuple(ref for ref in live.refs() if ref not in current),
        creates=tuple(o for o in render_job(job, ctx) if ObjectRef.of(o) not in current),
    )
    return replace(change, starts_after_deletes=bool(change.deletes))


def _finished_change(
    job: MxJob, live: LiveJob, state: State, base: ChangeBase, ttl_passed: str | None
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
    return base.change(Action.UNCHANGED, finished_reason(state), state=state)
