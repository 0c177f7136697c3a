"""What a runtime is: the protocol every runtime implements, and what it hands back.

A runtime turns a job into Kubernetes objects and reads the job's state back from them
(`batch/`: one batch Job per replica and a headless Service; `jobset/`: one JobSet that
Kueue admits whole). `runtimes/registry.py` is the registry that picks one per job
(`MxJob.runtime`);
planning, apply, the ledger and the report see only `Runtime` and `Live`, and the
neutral types of `runtime/` (`State`, `Failure`, `InPlace`, `Stray`, `RenderContext`).
A third runtime is a package of its own that implements `Runtime`, one line in the
registry, and the conformance test (`tests/runtimes/test_conformance.py`) run over it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mxgitops.model import FieldProblem, MxJob, OnChange, Path
from mxgitops.objects import Kind, KubeObject, Listing, LiveObjects, ObjectRef
from mxgitops.runtimes.shared.disruption import Disruption
from mxgitops.runtimes.shared.failure import Failure
from mxgitops.runtimes.shared.inplace import InPlace
from mxgitops.runtimes.shared.podtemplate import RenderContext
from mxgitops.runtimes.shared.state import MxReplicaStatus, State


@dataclass(frozen=True)
class Stray:
    """An object of ours whose name, labels and spec hash do not add up (hand-edited)."""

    ref: ObjectRef
    why: str

    def __str__(self) -> str:
        return f"{self.ref.kind.lower()}/{self.ref.name} ({self.why})"


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
    @property
    def created(self) -> str:
        """When its run was made: its oldest object's creationTimestamp ("" if unknown). A
        run made after the ledger recorded its spec finished is another run than that one."""
        ...

    def refs(self) -> list[ObjectRef]: ...
    def has(self, ref: ObjectRef) -> bool: ...
    def refs_of(self, spec_hash: str) -> list[ObjectRef]: ...
    def incomplete(self) -> str | None: ...
    def unfinished_job_refs(self) -> list[ObjectRef]: ...
    def finished_replicas(self) -> list[ObjectRef]: ...
    def status(self) -> tuple[State, list[MxReplicaStatus]]: ...
    def failure(self) -> Failure | None: ...
    def placement(self) -> str: ...
    def queue(self) -> str: ...
    def unreachable(self) -> str: ...
    def disruption(self) -> Disruption | None: ...
    def disruptions(self) -> tuple[str, ...]: ...
    def on_change(self) -> OnChange: ...
    def compare_in_place(self, job: MxJob) -> list[InPlace]: ...
    def training_pods(self) -> tuple[Mapping[str, Any] | None, tuple[KubeObject, ...]]:
        """Worker replica 0's newest pod, whose log the training record reads (None
        without one here), and the pods of its run, whose requests and times its
        resource use counts. Only that pod's log is read: a line another pod of the
        job prints is never seen."""
        ...


class Runtime(Protocol):
    """One way to run a job: what `runtimes/registry.py` asks of each runtime it registers."""

    @property
    def name(self) -> str:
        """Its `MxJob.runtime` value, and its name in the ledger's record of runtimes."""
        ...

    @property
    def kinds(self) -> frozenset[Kind]:
        """The kinds a sync LISTs for it (its objects', pods included, and what it reads
        beside them)."""
        ...

    @property
    def own_kinds(self) -> frozenset[Kind]:
        """The kinds only it makes: their LIST is skipped where the ledger records that
        this instance has none of its objects (`runtimes.unlisted`)."""
        ...

    @property
    def listings(self) -> tuple[Listing, ...]:
        """How a sync LISTs its kinds besides batch Jobs, Services and pods, in order."""
        ...

    def names_needed(self, jobs: Sequence[MxJob]) -> frozenset[Kind]:
        """The cluster-scoped kinds whose objects' names rendering `jobs` needs
        (`RenderContext.names`), read once per sync; none for most syncs."""
        ...

    def render(self, job: MxJob, ctx: RenderContext) -> list[KubeObject]:
        """Every object of the job, deterministic (the same job, the same bytes)."""
        ...

    def refs(self, job: MxJob) -> list[ObjectRef]:
        """The refs of `render`'s objects, in its order, without rendering them."""
        ...

    def owns_pod(self, pod: KubeObject) -> bool:
        """Whether a live pod is one of its objects' (the first runtime that says so
        groups it; the default runtime those no other runtime owns)."""
        ...

    def group_live(self, live: LiveObjects) -> Mapping[tuple[str, str], Live]:
        """Its live objects in `live` by (namespace, job)."""
        ...

    def as_created(self, rendered: Sequence[KubeObject]) -> LiveObjects:
        """Its `rendered` objects as a sync finds them once created (what controllers
        add at once included): what `mxgitops diff` compares a changed manifest with."""
        ...

    def in_place_values(self, job: MxJob) -> Mapping[str, Any]:
        """The fields of the job it patches in place, as it records them: equal values
        mean no in-place patch (review's quick check, before rendering anything)."""
        ...

    def hash_shape(self, job: MxJob) -> Mapping[str, Any] | None:
        """What it adds to the spec hash of a job that runs on it (the model's `runtime`
        block): what it cannot change on a live job beyond the model's own fields. None
        for the default runtime, whose jobs hash as every job did before runtimes."""
        ...

    def name_problems(self, job: MxJob) -> list[FieldProblem]:
        """The job's name within the limits of the names it derives from it (`spec.py`
        asks, of a job whose name is a DNS-1123 label)."""
        ...

    def scheduling_warnings(
        self, job: MxJob, scheduling: Mapping[str, Any], where: Path
    ) -> list[FieldProblem]:
        """What it cannot honour of the job's schedulingPolicy (at `where`), said as
        what happens instead."""
        ...
