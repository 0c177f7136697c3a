"""A job's state and its replica sets' states, whichever runtime runs it: pure.

The states every runtime reports (`State`, `ReplicaState`, `MxReplicaStatus`) and the
rules that turn replica states into a job's state, as the seed aggregated them
(`batch/status.py` states the failure semantics both runtimes keep). Any replica set
Failed → Failed; the deciding set (SCHEDULER of a dist job, else WORKER; WORKER under
`successPolicy: AllWorkers`) Succeeded → Succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from mxgitops.model import JobMode, ReplicaType, SuccessPolicy


class State(StrEnum):
    PENDING = "Pending"  # no replica runs yet: not scheduled, no pod yet, image pulling
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"  # its batch Jobs are suspended (runPolicy.suspend)
    WAITING = "Waiting"  # a change waits for it to finish (on-change: wait)
    DELETING = "Deleting"  # being pruned
    # With queues (the JobSet runtime under Kueue):
    QUEUED = "Queued"  # waits in its queue to be admitted whole (Kueue's reason says why)
    PREEMPTED = "Preempted"  # stopped whole by Kueue for a higher priority; runs again
    EVICTED = "Evicted"  # stopped whole by Kueue for another reason; runs again


class ReplicaState(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"
    UNKNOWN = "Unknown"  # no batch Job (gone, or removed by ttlSecondsAfterFinished)


@dataclass(frozen=True)
class MxReplicaStatus:
    """One replica set: its overall state and how many replicas are in each state;
    `reason` says why a pending replica waits (the scheduler's message)."""

    type: ReplicaType
    state: ReplicaState
    replicas_states: Mapping[ReplicaState, int]
    reason: str = ""


def aggregate(
    replica_type: ReplicaType, replicas: int, states: Sequence[ReplicaState], reason: str = ""
) -> MxReplicaStatus:
    """Failed if any failed, else Running if any runs, Pending if any waits to run,
    Suspended if any is, Succeeded if all did, else Unknown."""
    counts: dict[ReplicaState, int] = {}
    for one in states:  # as Counter would count them, without its cost per replica set
        counts[one] = counts.get(one, 0) + 1
    for state in _PRECEDENCE:
        if state in counts:
            break
    else:
        all_done = counts.get(ReplicaState.SUCCEEDED, 0) == replicas
        state = ReplicaState.SUCCEEDED if all_done else ReplicaState.UNKNOWN
    shown = reason if state is ReplicaState.PENDING else ""
    return MxReplicaStatus(replica_type, state, counts, shown)


# Any replica in one of these states gives its set that state, the first found first.
_PRECEDENCE = (
    ReplicaState.FAILED,
    ReplicaState.RUNNING,
    ReplicaState.PENDING,
    ReplicaState.SUSPENDED,
)


def job_state(
    mode: JobMode, success_policy: SuccessPolicy, statuses: Sequence[MxReplicaStatus]
) -> State:
    """Any set Failed → Failed; the deciding set Succeeded → Succeeded; then Running if
    any replica runs, Suspended if its replicas are suspended, Pending if any waits to
    run (the seed said Running: a person needs to know nothing runs yet), else Running.

    The deciding set is WORKER for a local job and SCHEDULER for a dist job,
    unless the success policy is AllWorkers (e.g. BytePS, whose scheduler never
    exits): then it is WORKER alone.
    """
    by_type = {s.type: s.state for s in statuses}
    if ReplicaState.FAILED in by_type.values():
        return State.FAILED
    if by_type.get(deciding_type(mode, success_policy)) is ReplicaState.SUCCEEDED:
        return State.SUCCEEDED
    if ReplicaState.RUNNING in by_type.values():
        return State.RUNNING
    if ReplicaState.SUSPENDED in by_type.values():
        return State.SUSPENDED
    if ReplicaState.PENDING in by_type.values():
        return State.PENDING
    return State.RUNNING


def deciding_type(mode: JobMode, success_policy: SuccessPolicy) -> ReplicaType:
    """Whose success is the job's: the scheduler's of a dist job, else the workers' (a
    local job, or `AllWorkers`, e.g. BytePS, whose scheduler never exits)."""
    if mode is JobMode.DIST and success_policy is SuccessPolicy.SCHEDULER:
        return ReplicaType.SCHEDULER
    return ReplicaType.WORKER
