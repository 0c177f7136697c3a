"""The training record of each run a sync sees (issue 45): worker 0's log, read a
bounded chunk at a time, folded into the record its note kept.

Which runs: those running, and those this sync records finished in the ledger (the
sync that first sees a run finished reads once more, for what it printed last, before
apply deletes anything). Which pod: the one its runtime names (`Live.training_pods`:
worker replica 0's), so a line another pod of the job prints is never seen.

What it costs: at most one read per run per sync, of at most `READ_BYTES` from where
the record left off (`sinceTime`, the time of the last whole line read; kubelet's
timestamps say it), never the whole log; and at most `budget` running jobs are read
in one sync, the least recently read first, the others waiting for the next sync (a
finishing run's last read never waits: its pods may be gone by then). A sync that
sees no running and no newly finished job makes no request here, and does not even
group the live objects again.

A log that cannot be read, or says anything at all, never fails a sync: the run keeps
the record it had, and a warning says why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from mxgitops.errors import ClusterError
from mxgitops.kube.clustertext import said
from mxgitops.model import CONTAINER_NAME, MxJob
from mxgitops.objects import KubeObject, LiveObjects
from mxgitops.planning.bookkeeping import LedgerAction
from mxgitops.planning.changes import Action, Plan
from mxgitops.planning.ledger import JobKey
from mxgitops.record.progress import declared_epochs
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.runtimes.registry import group_live
from mxgitops.runtimes.shared.state import State

READ_BYTES = 256 * 1024  # of one read (`limitBytes`)
# A running job's actions under which its run goes on (a replace, a delete end it).
_GOES_ON = frozenset({Action.UNCHANGED, Action.UPDATE, Action.HOLD, Action.REPAIR})
_SECOND = timedelta(seconds=1)


class LogAPI(Protocol):
    def pod_log_since(
        self, namespace: str, pod: str, *, container: str, since: str, limit_bytes: int
    ) -> str: ...


@dataclass(frozen=True)
class Run:
    """One run this sync follows: where its record is kept and where its log is."""

    key: JobKey
    commit: str  # the commit that asked for it: its note holds the record
    runtime_id: str
    pod: Mapping[str, Any] | None  # worker 0's
    pods: tuple[KubeObject, ...]
    finishing: bool  # this sync first sees it finished: the last read
    declared: int | None
    cluster: str


Records = Mapping[JobKey, TrainingRecord]


@dataclass(frozen=True)
class Collected:
    records: Records  # each run's, as read now or as it was kept
    read: frozenset[JobKey]  # the runs whose record this sync changed
    warnings: tuple[str, ...] = ()


# The records the notes keep of `runs` (outputs/recordnotes.py reads them).
Previous = Callable[[Sequence[Run]], Mapping[JobKey, TrainingRecord]]


def runs(plan: Plan, live: LiveObjects, jobs: Mapping[JobKey, MxJob]) -> list[Run]:
    """The runs of `plan` whose training this sync follows."""
    finishing = {c.key for c in plan.ledger_changes if c.action is LedgerAction.RECORD}
    followed = [
        c
        for c in plan.changes
        if c.runtime_id
        and (c.key in finishing or (c.state is State.RUNNING and c.action in _GOES_ON))
    ]
    if not followed:
        return []
    groups = group_live(live)
    found = []
    for change in followed:
        group = groups.get(change.key)
        if group is None or group.runtime_id != change.runtime_id:
            continue
        pod, pods = group.training_pods()
        job = jobs.get(change.key)
        found.append(
            Run(
                key=change.key,
                commit=change.commit,
                runtime_id=change.runtime_id,
                pod=pod,
                pods=pods,
                finishing=change.key in finishing,
                declared=declared_epochs(job) if job is not None else None,
                cluster=change.placement,
            )
        )
    return found


def collect(
    followed: Sequence[Run],
    api: LogAPI | None,
    previous: Previous,
    *,
    budget: int,
    now: datetime,
    read_bytes: int = READ_BYTES,
) -> Collected:
    """Each run's record, with what its log printed since the last read (`budget` running
    runs read at most, the least recently read first)."""
    if not followed:
        return Collected({}, frozenset())
    kept = previous(followed)
    records: dict[JobKey, TrainingRecord] = {}
    read: set[JobKey] = set()
    warnings: list[str] = []
    for run in chosen(followed, kept, budget):
        record = kept.get(run.key) or TrainingRecord()
        record = replace(
            record,
            declared_epochs=run.declared or record.declared_epochs,
            cluster=run.cluster or record.cluster,
        )
        if run.pods:
            record = record.with_pods(run.pods, now=now)
        name = str((run.pod or {}).get("metadata", {}).get("name") or "")
        if api is not None and name:
            try:
                text = api.pod_log_since(
                    run.key[0],
                    name,
                    container=CONTAINER_NAME,
                    since=record.read_until,
                    limit_bytes=read_bytes,
                )
            except ClusterError as exc:
                warnings.append(
                    f"{'/'.join(run.key)}: the log of {said(name, 253)} could not be read "
                    f"for its training record: {said(str(exc), 300)}"
                )
            else:
                record = fold(record, text, at_end=run.finishing, full=_full(text, read_bytes))
        records[run.key] = record
        read.add(run.key)
    for run in followed:
        if run.key not in records and run.key in kept:
            records[run.key] = kept[run.key]
    return Collected(records, frozenset(read), tuple(warnings))


def chosen(
    followed: Sequence[Run], kept: Mapping[JobKey, TrainingRecord], budget: int
) -> list[Run]:
    """The runs read this sync: every finishing one, and `budget` running ones, those
    read longest ago (never read first) first."""

    def last_read(run: Run) -> tuple[str, JobKey]:
        record = kept.get(run.key)
        return (record.read_until if record else "", run.key)

    running = sorted((r for r in followed if not r.finishing), key=last_read)
    return [r for r in followed if r.finishing] + running[: max(0, budget)]


def fold(record: TrainingRecord, text: str, *, at_end: bool, full: bool) -> TrainingRecord:
    """`record` with the chunk `text` (each line after its timestamp, as read with
    `timestamps=true`) folded in, and where the next read starts. A read that came back
    full and ended no line past where the last one started (one second of log longer
    than a read, or one line longer) moves on by a second: a log never stalls a run's
    record, at the price of what that second printed."""
    lines = text.split("\n")
    partial = lines.pop()  # "" when the chunk ends with a newline
    messages, until = [], record.read_until
    for line in lines:
        stamp, message = _stamped(line)
        messages.append(message)
        until = max(until, stamp)
    cut_stamp, cut_message = _stamped(partial) if partial else ("", "")
    chunk = "\n".join(messages) + ("\n" if messages else "") + cut_message
    folded = record.with_chunk(chunk, at_end=at_end and not full)
    if full and until <= record.read_until:
        until = _later(max(record.read_until, cut_stamp))
    return replace(folded, read_until=until)


def _stamped(line: str) -> tuple[str, str]:
    """(the line's time to the second, RFC 3339, or ""; the line without it)."""
    stamp, _, message = line.partition(" ")
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00")[:64])
    except ValueError:
        return "", line
    if moment.tzinfo is None:
        return "", line
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), message


def _later(stamp: str) -> str:
    if not stamp:
        return ""
    moment = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) + _SECOND
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _full(text: str, read_bytes: int) -> bool:
    return len(text.encode("utf-8", "replace")) >= read_bytes
