"""The runtime seam: how a job becomes Kubernetes objects, and how it is read back.

A runtime has two duties: render a job's objects (and name them without rendering),
and read a job's state and failure back from its live objects. `trainer/` is the
seed's (one batch Job per replica and a scheduler Service); `jobset/` runs a job as
one JobSet that Kueue admits whole. Planning, apply, the ledger and the report use
only what this module gives, whatever a job runs on: `render`, `refs`, `group_live`,
and the `LiveJob` reading interface both runtimes' live groups implement.

Which runtime a job runs on is part of the job (`MxJob.runtime`, decided when its
manifest is read, `scheduling.py`) and of its spec hash, so moving a job between
runtimes is a replace like any other changed spec.

Which kinds a sync must LIST is asked here too (`unlisted`, `in_use`,
`needs_record`): the JobSet runtime's own kind is listed unless the ledger
positively records that this instance has no JobSet and no desired job runs on
JobSet. The batch runtime's kinds (batch Jobs, Services, and pods, which every
runtime has) are listed by every sync.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from mxgitops.jobset import (
    LiveJobSet,
    created_jobsets,
    group_live_jobsets,
    is_jobset_pod,
    jobset_refs,
    render_jobset,
)
from mxgitops.model import MxJob, OnChange, Runtime
from mxgitops.objects import Kind, KubeObject, LiveObjects, ObjectRef
from mxgitops.trainer import (
    Failure,
    InPlace,
    MxReplicaStatus,
    RenderContext,
    State,
    job_refs,
    render_job,
)
from mxgitops.trainer import group_live as group_batch
from mxgitops.trainer.disruption import Disruption
from mxgitops.trainer.live import Stray

__all__ = [
    "Live",
    "as_created",
    "group_live",
    "in_use",
    "needs_record",
    "refs",
    "render",
    "unlisted",
]


class Live(Protocol):
    """What planning and the ledger read of one job's live objects, on any runtime."""

    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def key(self) -> tuple[str, str]: ...
    @property
    def strays(self) -> tuple[Stray, ...]: ...
    @property
    def has_objects(self) -> bool: ...
    @property
    def spec_hash(self) -> str | None: ...
    @property
    def runtime_id(self) -> str | None: ...
    @property
    def source(self) -> str | None: ...
    @property
    def commit(self) -> str | None: ...

    def refs(self) -> list[ObjectRef]: ...
    def has(self, ref: ObjectRef) -> bool: ...
    def refs_of(self, spec_hash: str) -> list[ObjectRef]: ...
    def incomplete(self) -> str | None: ...
    def unfinished_job_refs(self) -> list[ObjectRef]: ...
    def finished_replicas(self) -> list[ObjectRef]: ...
    def status(self) -> tuple[State, list[MxReplicaStatus]]: ...
    def failure(self) -> Failure | None: ...
    def placement(self) -> str: ...
    def unreachable(self) -> str: ...
    def disruption(self) -> Disruption | None: ...
    def on_change(self) -> OnChange: ...
    def compare_in_place(self, job: MxJob) -> list[InPlace]: ...


def render(job: MxJob, ctx: RenderContext) -> list[KubeObject]:
    """Every object of the job, on the runtime it runs on."""
    if job.runtime is Runtime.JOBSET:
        return render_jobset(job, ctx)
    return render_job(job, ctx)


def as_created(job: MxJob, ctx: RenderContext) -> Live:
    """The job's live group as a sync finds it once it has created the job's objects as
    rendered (and Kueue has made a queued JobSet's Workload): what `mxgitops diff`
    compares a changed manifest against, to show the patches a sync would make."""
    rendered = render(job, ctx)
    jobsets, workloads = created_jobsets([o for o in rendered if o["kind"] == Kind.JOBSET])
    live = LiveObjects(
        jobs=tuple(o for o in rendered if o["kind"] == Kind.JOB),
        services=tuple(o for o in rendered if o["kind"] == Kind.SERVICE),
        jobsets=tuple(jobsets),
        workloads=tuple(workloads),
    )
    return group_live(live)[job.key]


def refs(job: MxJob) -> list[ObjectRef]:
    """The refs of `render`'s objects, in its order, without rendering them."""
    if job.runtime is Runtime.JOBSET:
        return jobset_refs(job)
    return job_refs(job)


# The kind only a runtime makes, whose LIST a sync skips where the ledger records that
# this instance has no object of that runtime.
_OWN_KIND = {Runtime.JOBSET: Kind.JOBSET}
_KNOWN = frozenset(r.value for r in Runtime)


def unlisted(recorded: frozenset[str] | None, desired: Iterable[MxJob]) -> frozenset[Kind]:
    """The kinds a sync need not LIST: those of runtimes the ledger `recorded` says this
    instance has no object of, where no desired job runs on them. A ledger that does
    not say (None: none yet, no record, an unreadable one) or names a runtime this
    version does not know (a newer version's) skips nothing: a skipped LIST that hid a
    live job would let a job moved off that runtime run twice."""
    if recorded is None or not recorded <= _KNOWN:
        return frozenset()
    wanted = {job.runtime for job in desired}
    return frozenset(
        kind
        for runtime, kind in _OWN_KIND.items()
        if runtime.value not in recorded and runtime not in wanted
    )


def in_use(
    live: LiveObjects, creates: Iterable[KubeObject], recorded: frozenset[str] | None
) -> frozenset[str]:
    """The runtimes this instance may have objects of once a plan that creates `creates`
    is applied, as the ledger is to record them: the batch runtime always, another one
    if its objects were found live or are created. A kind that was not listed holds
    none (the ledger said so); one whose LIST answered 404 keeps the record it had
    (a 404 once does not prove its objects gone); names this version does not know
    are kept, for the version that wrote them to drop."""
    kinds = {o["kind"] for o in creates}
    names = {Runtime.BATCH.value}
    kept = recorded or frozenset()
    for runtime, kind in _OWN_KIND.items():
        unseen = kind in live.unserved and runtime.value in kept
        if kind in kinds or live.of(kind) or unseen:
            names.add(runtime.value)
    return frozenset(names | (kept - _KNOWN))


def needs_record(creates: Iterable[KubeObject], recorded: frozenset[str] | None) -> bool:
    """Whether creating `creates` needs the ledger to record their runtime first: a
    later sync would otherwise skip the LIST of their kind, and not see them."""
    have = recorded or frozenset()
    own = {kind: runtime.value for runtime, kind in _OWN_KIND.items()}
    return any(own[o["kind"]] not in have for o in creates if o["kind"] in own)


def group_live(live: LiveObjects) -> dict[tuple[str, str], Live]:
    """Live objects by (namespace, job), whichever runtime made them. A job with objects
    on both (a move between runtimes was interrupted) is one `Mixed` group."""
    batch_pods = tuple(p for p in live.pods if not is_jobset_pod(p))
    jobset_pods = tuple(p for p in live.pods if is_jobset_pod(p))
    batch: dict[tuple[str, str], Live] = dict(
        group_batch(LiveObjects(live.jobs, live.services, batch_pods, pod_events=live.pod_events))
    )
    jobsets = group_live_jobsets(live.jobsets, jobset_pods, live.workloads, live.clusters)
    for key, group in jobsets.items():
        other = batch.get(key)
        batch[key] = group if other is None or not _counts(other) else Mixed(other, group)
    return dict(sorted(batch.items()))


def _counts(live: Live) -> bool:
    return live.has_objects or bool(live.strays)


class Mixed:
    """A job with objects of both runtimes: no whole runtime, so any spec replaces it
    (its spec hash is no one's), and deleting it deletes both runtimes' objects."""

    def __init__(self, batch: Live, jobset: LiveJobSet) -> None:
        self._batch, self._jobset = batch, jobset
        self.namespace, self.name = jobset.namespace, jobset.name
        self.strays = batch.strays + jobset.strays
        self.has_objects = True
        self.spec_hash: str | None = None
        self.runtime_id: str | None = None
        self.source = jobset.source or batch.source
        self.commit = jobset.commit or batch.commit

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def refs(self) -> list[ObjectRef]:
        return sorted(self._batch.refs() + self._jobset.refs())

    def has(self, ref: ObjectRef) -> bool:
        return self._batch.has(ref) or self._jobset.has(ref)

    def refs_of(self, spec_hash: str) -> list[ObjectRef]:
        return sorted(self._batch.refs_of(spec_hash) + self._jobset.refs_of(spec_hash))

    def incomplete(self) -> str | None:
        return "its objects are of two runtimes (a move between runtimes was interrupted)"

    def unfinished_job_refs(self) -> list[ObjectRef]:
        return sorted(self._batch.unfinished_job_refs() + self._jobset.unfinished_job_refs())

    def finished_replicas(self) -> list[ObjectRef]:
        return []  # replaced whole by any spec already

    def status(self) -> tuple[State, list[MxReplicaStatus]]:
        return self._jobset.status()

    def failure(self) -> Failure | None:
        return self._jobset.failure() or self._batch.failure()

    def placement(self) -> str:
        return self._jobset.placement()

    def unreachable(self) -> str:
        return self._jobset.unreachable()

    def disruption(self) -> Disruption | None:
        return None  # replaced whole by any spec already

    def on_change(self) -> OnChange:
        return OnChange.REPLACE

    def compare_in_place(self, job: MxJob) -> list[InPlace]:
        return []
