"""What every change the planner makes of one job shares: pure.

`ChangeBase` carries a job's identity, its replicas' states and why it failed, once,
into each `Change` made of it (`plan.py` for jobs the repository wants, `pruning.py` for
those it no longer does); a job held waiting (`on-change: wait`) or held because its
objects do not add up is said the same way by both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from mxgitops.model import ON_CHANGE_ANNOTATION, MxJob
from mxgitops.objects import KubeObject, ObjectRef
from mxgitops.planning.changes import Action, Change
from mxgitops.runtimes.shared.base import Live as LiveJob
from mxgitops.runtimes.shared.failure import Failure
from mxgitops.runtimes.shared.inplace import InPlace
from mxgitops.runtimes.shared.state import MxReplicaStatus, ReplicaState, State

FINISHED = (State.SUCCEEDED, State.FAILED)


@dataclass(frozen=True)
class ChangeBase:
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
    queue: str = ""  # the Kueue LocalQueue the job names

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
            queue=self.queue,
        )


def starting(base: ChangeBase, job: MxJob) -> ChangeBase:
    """A job just (re)started: running, by the seed's rules, with no replica reported
    yet, exactly as the next sync will read it back before pods appear."""
    pending = tuple(
        MxReplicaStatus(r.type, ReplicaState.PENDING, {ReplicaState.PENDING: r.replicas})
        for r in job.replica_specs
    )
    return replace(base, replicas=pending, runtime_id=job.runtime_id, failure=None)


def none_made(replicas: Sequence[MxReplicaStatus]) -> bool:
    """No replica has anything that runs (a first sync killed after the batch runtime's
    Service, say)."""
    return bool(replicas) and all(r.state is ReplicaState.UNKNOWN for r in replicas)


def finished_reason(state: str) -> str:
    return f"{state.lower()}; a finished job runs again only when its spec changes"


def left_alone(base: ChangeBase, live: LiveJob, why: str = "") -> Change:
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


def waiting(base: ChangeBase, state: State, what: str) -> Change:
    """Held, as the job's on-change annotation asks: `what` happens once it has finished."""
    return base.change(
        Action.HOLD,
        f"{what} when the {state.lower()} job finishes ({ON_CHANGE_ANNOTATION}: wait)",
        state=State.WAITING,
    )
