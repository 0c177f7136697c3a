"""The runtime registry: which runtime runs a job, and what every runtime shares.

A runtime (`runtime/base.py`'s `Runtime`) renders a job's objects (and names them
without rendering), and reads a job's state and failure back from its live objects.
`batch/` is the seed's (one batch Job per replica and a scheduler Service); `jobset/`
runs a job as one JobSet that Kueue admits whole. Planning, apply, the ledger and the
report use only what this module gives, whatever a job runs on: `render`, `refs`,
`group_live`, and the `Live` reading interface every runtime's live groups implement.
A new runtime is one entry in `RUNTIMES`.

Which runtime a job runs on is part of the job (`MxJob.runtime`, its name here, decided
by `runtime_for` when its manifest is read) and of its spec hash (each runtime's
`hash_shape`, given to the model by `install_hash_shapes`), so moving a job
between runtimes is a replace like any other changed spec. Reading a manifest asks the
job's runtime for its name rules and what it cannot honour of the schedulingPolicy.

Which kinds a sync must LIST is asked here too (`unlisted`, `in_use`, `needs_record`):
a runtime's own kinds are listed unless the ledger positively records that this
instance has none of its objects and no desired job runs on it. The default runtime's
kinds (batch Jobs, Services, and pods, which every runtime has) are listed by every sync.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mxgitops import model
from mxgitops.model import JobMode, MxJob, OnChange
from mxgitops.objects import Kind, KubeObject, Listing, LiveObjects, ObjectRef
from mxgitops.runtimes.batch.registered import BatchRuntime
from mxgitops.runtimes.jobset.registered import JobSetRuntime
from mxgitops.runtimes.shared.base import Live
from mxgitops.runtimes.shared.base import Runtime as RuntimeImpl
from mxgitops.runtimes.shared.disruption import Disruption
from mxgitops.runtimes.shared.failure import Failure
from mxgitops.runtimes.shared.inplace import InPlace
from mxgitops.runtimes.shared.podtemplate import RenderContext
from mxgitops.runtimes.shared.state import MxReplicaStatus, State

__all__ = [
    "HASH_SHAPES",
    "NAMES",
    "RUNTIMES",
    "Live",
    "Mixed",
    "as_created",
    "group_live",
    "in_place_values",
    "in_use",
    "install_hash_shapes",
    "listings",
    "names_needed",
    "needs_record",
    "own_kinds",
    "refs",
    "render",
    "runtime_for",
    "runtime_of",
    "unlisted",
]

_QUEUED = JobSetRuntime()  # the runtime of a job that names a queue: Kueue admits it whole
# Every runtime, by `MxJob.runtime`; the first is the default, whose live objects are
# those no other runtime claims (its kinds are listed by every sync).
RUNTIMES: Mapping[str, RuntimeImpl] = {r.name: r for r in (BatchRuntime(), _QUEUED)}
_DEFAULT, *_OTHERS = RUNTIMES
NAMES = tuple(RUNTIMES)  # the choices of --default-runtime
# What each runtime adds to the spec hash of a job that runs on it, by runtime name
HASH_SHAPES: Mapping[str, model.HashShape] = {n: r.hash_shape for n, r in RUNTIMES.items()}


def install_hash_shapes() -> None:
    """Give the model every runtime's `HASH_SHAPES`, which it cannot import (every runtime
    imports the model). Called once by each entry point before any job is hashed: the
    CLI's group, the tests' conftest, a bench script; a job hashed before it raises
    `LookupError` naming its runtime, never a hash without the runtime's part."""
    model.use_hash_shapes(HASH_SHAPES)


def runtime_for(mode: JobMode, queue: str, default: str) -> str:
    """The runtime a job runs on: the one Kueue admits for a queued job, and for a dist
    job the operator's `default` (a local job needs no gang unless it is queued)."""
    if queue:
        return _QUEUED.name
    return default if mode is JobMode.DIST else _DEFAULT


def runtime_of(job: MxJob) -> RuntimeImpl:
    """The runtime `job` runs on."""
    return RUNTIMES[job.runtime]


def render(job: MxJob, ctx: RenderContext) -> list[KubeObject]:
    """Every object of the job, on the runtime it runs on."""
    return runtime_of(job).render(job, ctx)


def refs(job: MxJob) -> list[ObjectRef]:
    """The refs of `render`'s objects, in its order, without rendering them."""
    return runtime_of(job).refs(job)


def in_place_values(job: MxJob) -> Mapping[str, Any]:
    """The job's fields its runtime patches in place, as it records them."""
    return runtime_of(job).in_place_values(job)


def as_created(job: MxJob, ctx: RenderContext) -> Live:
    """The job's live group as a sync finds it once it has created the job's objects as
    rendered (and the controllers have made what they make at once): what `mxgitops
    diff` compares a changed manifest against, to show the patches a sync would make."""
    runtime = runtime_of(job)
    return runtime.group_live(runtime.as_created(runtime.render(job, ctx)))[job.key]


def listings() -> tuple[Listing, ...]:
    """How a sync LISTs every runtime's own kinds (`kubereads.list_live`), in order."""
    return tuple(listing for runtime in RUNTIMES.values() for listing in runtime.listings)


def own_kinds() -> tuple[Kind, ...]:
    """The kinds of a job's objects only some runtime makes (JobSets), beside the batch
    Jobs and Services of every instance; in a stable order."""
    return tuple(sorted({kind for runtime in RUNTIMES.values() for kind in runtime.own_kinds}))


def names_needed(jobs: Sequence[MxJob]) -> frozenset[Kind]:
    """The cluster-scoped kinds whose names the runtimes render `jobs` by."""
    return frozenset(k for runtime in RUNTIMES.values() for k in runtime.names_needed(jobs))


_OWN_KIND = {kind: name for name, runtime in RUNTIMES.items() for kind in runtime.own_kinds}
_KNOWN = frozenset(RUNTIMES)


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
        for kind, runtime in _OWN_KIND.items()
        if runtime not in recorded and runtime not in wanted
    )


def in_use(
    live: LiveObjects, creates: Iterable[KubeObject], recorded: frozenset[str] | None
) -> frozenset[str]:
    """The runtimes this instance may have objects of once a plan that creates `creates`
    is applied, as the ledger is to record them: those without kinds of their own (the
    batch runtime) always, another one if its objects were found live or are created.
    A kind that was not listed holds none (the ledger said so); one whose LIST answered
    404 keeps the record it had (a 404 once does not prove its objects gone); names this
    version does not know are kept, for the version that wrote them to drop."""
    created = {o["kind"] for o in creates}
    names = {name for name, runtime in RUNTIMES.items() if not runtime.own_kinds}
    kept = recorded or frozenset()
    for kind, runtime in _OWN_KIND.items():
        unseen = kind in live.unserved and runtime in kept
        if kind in created or live.of(kind) or unseen:
            names.add(runtime)
    return frozenset(names | (kept - _KNOWN))


def needs_record(creates: Iterable[KubeObject], recorded: frozenset[str] | None) -> bool:
    """Whether creating `creates` needs the ledger to record their runtime first: a
    later sync would otherwise skip the LIST of their kind, and not see them."""
    have = recorded or frozenset()
    return any(_OWN_KIND[o["kind"]] not in have for o in creates if o["kind"] in _OWN_KIND)


def group_live(live: LiveObjects) -> dict[tuple[str, str], Live]:
    """Live objects by (namespace, job), whichever runtime made them. A job with objects
    on two runtimes (a move between runtimes was interrupted) is one `Mixed` group."""
    pods: dict[str, list[KubeObject]] = {name: [] for name in RUNTIMES}
    for pod in live.pods:
        pods[next((n for n in _OTHERS if RUNTIMES[n].owns_pod(pod)), _DEFAULT)].append(pod)
    grouped: dict[tuple[str, str], Live] = {}
    for name, runtime in RUNTIMES.items():
        for key, group in runtime.group_live(live.with_kind(Kind.POD, tuple(pods[name]))).items():
            other = grouped.get(key)
            grouped[key] = group if other is None or not _counts(other) else Mixed(other, group)
    return dict(sorted(grouped.items()))


def _counts(live: Live) -> bool:
    return live.has_objects or bool(live.strays)


class Mixed:
    """A job with objects of two runtimes (`batch`: the default one's, `jobset`: the
    other's): no whole runtime, so any spec replaces it (its spec hash is no one's), and
    deleting it deletes both runtimes' objects."""

    def __init__(self, batch: Live, jobset: Live) -> None:
        self._batch, self._jobset = batch, jobset
        self.namespace, self.name = jobset.namespace, jobset.name
        self.strays = batch.strays + jobset.strays
        self.has_objects = True
        self.spec_hash: str | None = None
        self.runtime_id: str | None = None
        self.source = jobset.source or batch.source
        self.commit = jobset.commit or batch.commit
        self.created = min(filter(None, (batch.created, jobset.created)), default="")

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

    def queue(self) -> str:
        return self._jobset.queue()

    def unreachable(self) -> str:
        return self._jobset.unreachable()

    def disruption(self) -> Disruption | None:
        return None  # replaced whole by any spec already

    def disruptions(self) -> tuple[str, ...]:
        return ()

    def on_change(self) -> OnChange:
        return OnChange.REPLACE

    def compare_in_place(self, job: MxJob) -> list[InPlace]:
        return []

    def training_pods(self) -> tuple[Mapping[str, Any] | None, tuple[KubeObject, ...]]:
        return None, ()  # replaced whole by any spec already: no run to record
