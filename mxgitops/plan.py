"""Planning: diff(desired, live) -> Plan, a pure function.

Given the jobs the repository wants, the objects this instance owns in the
cluster and the ledger of finished jobs, decide one change per job and say
why. Nothing here performs I/O, so a plan can be printed (`--dry-run`),
tested without a cluster, and handed to `apply.py`, which does exactly what
it says and nothing else.

The GitOps rules live here: unchanged specs write nothing, missing pieces are
repaired, changed specs replace (or wait, if the manifest asks), removed
manifests prune (within the safety limits), invalid manifests protect their
live job, and finished jobs never run again unless their spec changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum

from mxgitops.ledger import Finished, JobKey, Ledger
from mxgitops.objects import Kind, KubeObject, LiveObjects, ObjectRef, annotations_of
from mxgitops.spec import ON_CHANGE_ANNOTATION, CleanPodPolicy, MxJob, OnChange
from mxgitops.trainer import (
    AcceleratorConfig,
    LiveJob,
    MxReplicaStatus,
    RenderContext,
    ReplicaState,
    State,
    group_live,
    job_refs,
    render_job,
)

DEFAULT_MAX_PRUNE_SHARE = 0.5
FINISHED = (State.SUCCEEDED, State.FAILED)


class Action(StrEnum):
    CREATE = "create"
    REPLACE = "replace"
    REPAIR = "repair"
    DELETE = "delete"
    CLEAN = "clean"  # a finished job's pods go, as its cleanPodPolicy asks
    HOLD = "hold"  # a change waits: for the job to finish, or for a valid manifest
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

    @property
    def key(self) -> JobKey:
        return (self.namespace, self.name)

    @property
    def writes(self) -> bool:
        return bool(self.creates or self.deletes)


@dataclass(frozen=True)
class PlanOptions:
    instance: str
    commit: str = ""
    accelerators: Mapping[str, AcceleratorConfig] = field(default_factory=dict)
    prune: bool = True
    max_prune_share: float = DEFAULT_MAX_PRUNE_SHARE
    force_prune: bool = False
    now: datetime | None = None  # when finished jobs are recorded in the ledger

    def render_context(self) -> RenderContext:
        return RenderContext(
            instance=self.instance,
            commit=self.commit,
            accelerators=self.accelerators,
        )


@dataclass(frozen=True)
class Plan:
    changes: tuple[Change, ...]
    ledger: Ledger  # the ledger as it should be after this sync
    ledger_changed: bool = False
    prune_refused: str | None = None  # why deletions were held back, if they were

    @property
    def writes(self) -> bool:
        return self.ledger_changed or any(c.writes for c in self.changes)

    def count(self, action: Action) -> int:
        return sum(1 for c in self.changes if c.action is action)


def plan(
    desired: Sequence[MxJob],
    live: LiveObjects,
    ledger: Ledger,
    options: PlanOptions,
    *,
    invalid: frozenset[JobKey] = frozenset(),
    unnamed_invalid: int = 0,
) -> Plan:
    """One change per job known to the repository, the cluster or both.

    `invalid` names the jobs whose manifests are invalid; `unnamed_invalid`
    counts invalid manifests whose job cannot even be named, which might be
    any live job, so no job is pruned while there are any.
    """
    live_jobs = group_live(live)
    ctx = options.render_context()
    changes = [_desired_change(job, live_jobs.get(job.key), ledger, ctx) for job in desired]
    wanted = {job.key for job in desired}
    orphans = [live_jobs[key] for key in sorted(live_jobs) if key not in wanted]
    changes += _orphan_changes(orphans, invalid, options)
    refused = _prune_refusal(changes, len(live_jobs), len(desired), unnamed_invalid, options)
    if refused:
        changes = [_hold_delete(c, refused) if c.action is Action.DELETE else c for c in changes]
    new_ledger, ledger_changed = _record_finished(ledger, changes, live_jobs, options)
    return Plan(tuple(sorted(changes, key=lambda c: c.key)), new_ledger, ledger_changed, refused)


def _desired_change(job: MxJob, live: LiveJob | None, ledger: Ledger, ctx: RenderContext) -> Change:
    base = _Base(job.namespace, job.name, job.spec_hash, job.source_path)
    finished = ledger.finished(job.key, job.spec_hash)
    if finished is not None and live is not None and not (live.jobs or live.services):
        live = None  # only pods are left (Jobs deleted with orphan propagation): not a new spec
    if live is None:
        if finished is not None:
            return base.change(
                Action.UNCHANGED, _finished_reason(finished.state), state=State(finished.state)
            )
        return _starting(base, job).change(
            Action.CREATE, "new job", state=State.RUNNING, creates=tuple(render_job(job, ctx))
        )
    state, replicas = live.status()
    if finished is not None:
        state = State(finished.state)
    base = replace(base, replicas=tuple(replicas))
    if live.spec_hash != job.spec_hash:
        return _changed_spec(job, live, state, ctx, base)
    if state in FINISHED:
        return _finished_change(job, live, state, base)
    return _running_change(job, live, state, ctx, base)


def _running_change(
    job: MxJob, live: LiveJob, state: State, ctx: RenderContext, base: _Base
) -> Change:
    """Self-heal: recreate what is missing of a running job.

    With ttlSecondsAfterFinished, Kubernetes deletes each batch Job once its
    replica finished, while the others may still run; recreating it would run
    that replica again, so only a missing Service is recreated then.
    """
    present = set(live.refs())
    missing = {ref for ref in job_refs(job) if ref not in present}
    collected = []
    if job.run_policy.ttl_seconds_after_finished is not None:
        collected = [ref for ref in missing if ref.kind is Kind.JOB]
        missing -= set(collected)
    if missing:
        names = ", ".join(sorted(ref.name for ref in missing))
        return base.change(
            Action.REPAIR,
            f"{len(missing)} of its objects are missing: {names}",
            state=state,
            creates=tuple(o for o in render_job(job, ctx) if ObjectRef.of(o) in missing),
        )
    if collected:
        return base.change(
            Action.UNCHANGED,
            f"in sync; {len(collected)} batch Jobs finished and were removed by "
            "ttlSecondsAfterFinished, and are not run again",
            state=state,
        )
    return base.change(Action.UNCHANGED, "in sync", state=state)


@dataclass(frozen=True)
class _Base:
    """What every change of one job shares; `change` fills in the rest."""

    namespace: str
    name: str
    spec_hash: str | None
    source: str
    replicas: tuple[MxReplicaStatus, ...] = ()

    def change(
        self,
        action: Action,
        reason: str,
        *,
        state: State | None = None,
        creates: tuple[KubeObject, ...] = (),
        deletes: tuple[ObjectRef, ...] = (),
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
        )


def _starting(base: _Base, job: MxJob) -> _Base:
    """A job just (re)started: running, by the seed's rules, with no replica reported
    yet, exactly as the next sync will read it back before pods appear."""
    unknown = tuple(
        MxReplicaStatus(r.type, ReplicaState.UNKNOWN, {ReplicaState.UNKNOWN: r.replicas})
        for r in job.replica_specs
    )
    return replace(base, replicas=unknown)


def _finished_reason(state: str) -> str:
    return f"{state.lower()}; a finished job runs again only when its spec changes"


def _changed_spec(
    job: MxJob, live: LiveJob, state: State, ctx: RenderContext, base: _Base
) -> Change:
    if state not in FINISHED and job.on_change is OnChange.WAIT:
        return base.change(
            Action.HOLD,
            f"spec changed; waiting for the {state.lower()} job "
            f"to finish ({ON_CHANGE_ANNOTATION}: wait)",
            state=state,
        )
    return base.change(
        Action.REPLACE,
        f"spec changed (runtime {live.runtime_id} -> {job.runtime_id})",
        state=State.RUNNING,
        deletes=tuple(live.refs()),
        creates=tuple(render_job(job, ctx)),
    )


def _finished_change(job: MxJob, live: LiveJob, state: State, base: _Base) -> Change:
    policy = job.run_policy.clean_pod_policy
    doomed = _cleanable(live, policy)
    if doomed:
        return base.change(
            Action.CLEAN,
            f"{state.lower()}; cleanPodPolicy {policy} removes {len(doomed)} of its objects",
            state=state,
            deletes=doomed,
        )
    return base.change(Action.UNCHANGED, _finished_reason(state), state=state)


def _cleanable(live: LiveJob, policy: CleanPodPolicy | None) -> tuple[ObjectRef, ...]:
    """Pods go through their batch Jobs: deleting a Job takes its pods with it."""
    if policy is CleanPodPolicy.ALL:
        return tuple(live.refs())
    if policy is CleanPodPolicy.RUNNING:
        return tuple(live.unfinished_job_refs())
    return ()


def _orphan_changes(
    orphans: Sequence[LiveJob], invalid: frozenset[JobKey], options: PlanOptions
) -> list[Change]:
    changes = []
    for live in orphans:
        state, replicas = live.status()
        base = _Base(live.namespace, live.name, live.spec_hash, live.source or "", tuple(replicas))
        if live.key in invalid:
            change = base.change(
                Action.HOLD, "its manifest is invalid; the live job is left as is", state=state
            )
        elif not options.prune:
            change = base.change(Action.HOLD, "manifest removed; pruning is off", state=state)
        elif state not in FINISHED and _on_change(live) is OnChange.WAIT:
            change = base.change(
                Action.HOLD,
                f"manifest removed; waiting for the "
                f"{state.lower()} job to finish ({ON_CHANGE_ANNOTATION}: wait)",
                state=state,
            )
        else:
            change = base.change(
                Action.DELETE, "manifest removed", state=state, deletes=tuple(live.refs())
            )
        changes.append(change)
    return changes


def _on_change(live: LiveJob) -> OnChange:
    values = {annotations_of(o).get(ON_CHANGE_ANNOTATION) for o in live.jobs + live.services}
    return OnChange.WAIT if OnChange.WAIT.value in values else OnChange.REPLACE


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
            f"{unnamed_invalid} invalid manifests name no job, and any of them may be "
            "the manifest of a job that would be pruned; fix them first"
        )
    if desired_count == 0:
        return (
            f"no valid manifest was found but {live_count} live jobs exist; refusing to "
            "prune them all (use --force-prune if that is really wanted)"
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
    return Change(
        change.namespace,
        change.name,
        Action.HOLD,
        f"manifest removed; {why}",
        change.state,
        change.spec_hash,
        change.source,
    )


def _record_finished(
    ledger: Ledger,
    changes: Sequence[Change],
    live_jobs: Mapping[JobKey, LiveJob],
    options: PlanOptions,
) -> tuple[Ledger, bool]:
    """Remember every job seen finished; forget jobs known neither to Git nor the cluster."""
    now = (options.now or datetime.now().astimezone()).isoformat(timespec="seconds")
    record = [
        Finished(c.namespace, c.name, live_jobs[c.key].spec_hash or "", str(c.state), now)
        for c in changes
        if c.key in live_jobs
        and c.state in FINISHED
        and live_jobs[c.key].spec_hash
        and ledger.finished(c.key, live_jobs[c.key].spec_hash or "") is None
    ]
    keep = {c.key for c in changes}
    updated = ledger.updated(record, keep)
    return updated, bool(record) or set(updated.entries) != set(ledger.entries)
