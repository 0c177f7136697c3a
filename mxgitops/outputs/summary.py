"""What a sync did and found, as a value: the `Summary` of its jobs, and its
machine-readable form, read back as untrusted input.

`report.py` builds a summary from a plan and renders it; the outputs (`outputs/sinks.py`,
`forge/`, `events.py`, `metrics.py`) read it. A summary is also read back from a git
note, which anyone who may push notes can write: `Summary.from_dict` checks every
field's type (`notecheck.py`) and raises NoteError naming the first that is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from mxgitops.outputs.notecheck import FAILURE, JOB, REPLICA, SUMMARY, NoteError, fields
from mxgitops.planning.changes import Action
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.record.stored import RecordShapeError, note_json, read_record
from mxgitops.runtimes.shared.failure import Failure

FORMAT_VERSION = 1


@dataclass(frozen=True)
class ReplicaSummary:
    type: str
    state: str
    replicas: int
    states: Mapping[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        counts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(self.states.items()))
        return f"{self.type} {self.state}" + (f" ({counts})" if counts else "")


@dataclass(frozen=True)
class JobSummary:
    namespace: str
    name: str
    action: str
    reason: str
    state: str = ""
    spec_hash: str = ""
    source: str = ""
    replicas: tuple[ReplicaSummary, ...] = ()
    objects: tuple[str, ...] = ()  # what the action creates or deletes, as kind/name
    errors: tuple[str, ...] = ()
    runtime_id: str = ""  # the live runtime (the new one during a replace)
    state_reason: str = ""  # why a job waits: the scheduler's message, or Kueue's
    failure: Mapping[str, Any] | None = None  # runtime.failure.Failure's fields, for a Failed job
    warnings: tuple[str, ...] = ()  # the API's warnings on its writes (a Warning header)
    commit: str = ""  # that submitted its live objects: where its commit status goes
    author: str = ""  # of that commit: who to tell (`source.githistory.authors`)
    placement: str = ""  # the cluster it runs on, where another (Kueue's MultiKueue)
    queue: str = ""  # the Kueue LocalQueue it names
    moved_from: str = ""  # the cluster it ran on before Kueue dispatched it again
    unreachable: str = ""  # why its state may be stale: its cluster does not answer
    record: TrainingRecord | None = None  # its run's training, as its worker 0's log showed it

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}/{self.name}"

    def details(self) -> list[str]:
        """Lines under the job's row: why it waits or failed, and its log's last lines."""
        waits = (self.state or "pending").lower()
        lines = (
            [f"{self.qualified_name}: {waits}: {self.state_reason}"] if self.state_reason else []
        )
        if self.placement:
            lost = f": {self.unreachable}" if self.unreachable else ""
            lines.append(f"{self.qualified_name}: {waits} on cluster {self.placement}{lost}")
        if self.moved_from:
            lines.append(
                f"{self.qualified_name}: dispatched again by Kueue, from cluster "
                f"{self.moved_from} to {self.placement}: it runs again from the start"
            )
        if self.failure:
            failure = Failure.from_mapping(self.failure)
            lines.append(f"{self.qualified_name}: failed: {failure.describe()}")
            if failure.log:
                lines.append(f"  last lines of {failure.pod or 'its'} {failure.container} log:")
                lines += [f"  | {line}" for line in failure.log.splitlines()]
        return lines


@dataclass(frozen=True)
class Summary:
    commit: str = ""
    instance: str = ""
    jobs: tuple[JobSummary, ...] = ()
    problems: tuple[str, ...] = ()
    prune_refused: str | None = None
    dry_run: bool = False
    warnings: tuple[str, ...] = ()  # valid manifests' warnings; never make a sync fail
    synced_at: str = ""  # when the sync ran: UTC, RFC 3339
    version: str = ""  # of mxgitops

    @property
    def ok(self) -> bool:
        return not self.problems and not any(j.errors for j in self.jobs)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for job in self.jobs:
            counts[job.action] = counts.get(job.action, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        data = asdict(replace(self, jobs=tuple(replace(job, record=None) for job in self.jobs)))
        for job, shown in zip(self.jobs, data["jobs"], strict=True):
            shown["record"] = json.loads(note_json(job.record)) if job.record else None
        return {"version": FORMAT_VERSION, **data}

    @classmethod
    def from_dict(cls, data: Any) -> Summary:
        """The summary in `data` as `to_dict` wrote it; NoteError naming the first field of
        the wrong type (a note is anyone's to write: nothing of it is trusted)."""
        top = fields(data, "the note", SUMMARY)
        return cls(
            commit=top.get("commit", ""),
            instance=top.get("instance", ""),
            jobs=tuple(_job(job, f"jobs[{n}]") for n, job in enumerate(top.get("jobs", ()))),
            problems=tuple(top.get("problems", ())),
            prune_refused=top.get("prune_refused"),
            dry_run=top.get("dry_run", False),
            warnings=tuple(top.get("warnings", ())),
            synced_at=top.get("synced_at", ""),
            version=str(top.get("version", "")),
        )


def _job(data: Any, where: str) -> JobSummary:
    job = fields(data, where, JOB)
    for key in ("namespace", "name", "action", "reason"):
        if key not in job:
            raise NoteError(f"{where}.{key}: missing")
    if job["action"] not in {a.value for a in Action}:
        raise NoteError(f"{where}.action: {job['action'][:40]!r} is no action of mxgitops")
    replicas = []
    for n, raw in enumerate(job.get("replicas", ())):
        replica = fields(raw, f"{where}.replicas[{n}]", REPLICA)
        states = replica.get("states", {})
        if not all(isinstance(k, str) and type(v) is int for k, v in states.items()):
            raise NoteError(f"{where}.replicas[{n}].states: expected counts by state")
        if not {"type", "state", "replicas"} <= replica.keys():
            raise NoteError(f"{where}.replicas[{n}]: type, state and replicas are needed")
        replicas.append(ReplicaSummary(**replica))
    job["record"] = _record(job.get("record"), f"{where}.record")
    if job.get("failure") is not None:
        job["failure"] = fields(job["failure"], f"{where}.failure", FAILURE)
        if "replica" not in job["failure"]:
            raise NoteError(f"{where}.failure.replica: missing")
    return JobSummary(
        **{
            **job,
            "replicas": tuple(replicas),
            "objects": tuple(job.get("objects", ())),
            "errors": tuple(job.get("errors", ())),
            "warnings": tuple(job.get("warnings", ())),
        }
    )


def _record(data: dict[str, Any] | None, where: str) -> TrainingRecord | None:
    """A note's training record, checked whole (`read_record`): one that is not ours
    refuses the note, as any other field of the wrong shape does."""
    if data is None:
        return None
    try:
        return read_record(json.dumps(data, allow_nan=False))
    except (RecordShapeError, ValueError) as refused:
        raise NoteError(f"{where}: {refused}") from None
