"""Jobs the repository no longer wants: pruned, held, or left alone, within the guards.

A removed manifest deletes its live job, unless the job runs and asks to finish first
(`on-change: wait`, cancelled by the repository's `cancel` list), its objects do not
add up, or pruning is off. An invalid manifest protects its live job. And no job is
pruned while an invalid manifest names no job, nor when no valid manifest is left, nor
beyond the share of live jobs the operator allows, unless forced. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from mxgitops.model import OnChange
from mxgitops.planning.changes import Action, Change, PlanOptions
from mxgitops.planning.ledger import JobKey
from mxgitops.planning.planbase import FINISHED, ChangeBase, left_alone, waiting
from mxgitops.runtimes.shared.base import Live as LiveJob
from mxgitops.runtimes.shared.state import State
from mxgitops.words import counted


def orphan_changes(
    orphans: Sequence[LiveJob], invalid: frozenset[JobKey], options: PlanOptions
) -> list[Change]:
    changes = []
    for live in orphans:
        state, replicas = live.status()
        base = ChangeBase(
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
            live.queue(),
        )
        if live.key in invalid:
            change = base.change(
                Action.HOLD, "its manifest is invalid; the live job is left as is", state=state
            )
        elif live.strays:
            change = left_alone(base, live, "manifest removed; ")
        elif not options.prune:
            change = base.change(Action.HOLD, "manifest removed; pruning is off", state=state)
        else:
            change = _prune(base, live, state, "/".join(live.key) in options.cancel)
        changes.append(change)
    return changes


def _prune(base: ChangeBase, live: LiveJob, state: State, cancelled: bool = False) -> Change:
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
        return waiting(base, state, "manifest removed; removed")
    elif waits:
        reason += f"; not held: {leftover}, which is no running job"
    return base.change(Action.DELETE, reason, state=state, deletes=tuple(live.refs()))


def _on_change(live: LiveJob) -> OnChange:
    return live.on_change()


def prune_refusal(
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


def hold_delete(change: Change, why: str) -> Change:
    return replace(change, action=Action.HOLD, reason=f"manifest removed; {why}", deletes=())
