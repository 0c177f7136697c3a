"""The batch runtime as the registry sees it (`runtime/base.py`'s `Runtime`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mxgitops.model import DEFAULT_RUNTIME, FieldProblem, MxJob, Path
from mxgitops.objects import Kind, KubeObject, Listing, LiveObjects, ObjectRef
from mxgitops.runtimes.batch import rules
from mxgitops.runtimes.batch.inplace import desired
from mxgitops.runtimes.batch.live import group_live
from mxgitops.runtimes.batch.render import job_refs, render_job
from mxgitops.runtimes.shared.base import Live
from mxgitops.runtimes.shared.podtemplate import RenderContext


class BatchRuntime:
    """One batch Job per replica and (dist) one headless Service: the seed's."""

    name = DEFAULT_RUNTIME
    kinds = frozenset({Kind.JOB, Kind.SERVICE, Kind.POD})
    own_kinds: frozenset[Kind] = frozenset()  # listed by every sync
    listings: tuple[Listing, ...] = ()

    def names_needed(self, jobs: Sequence[MxJob]) -> frozenset[Kind]:
        return frozenset()

    def render(self, job: MxJob, ctx: RenderContext) -> list[KubeObject]:
        return render_job(job, ctx)

    def refs(self, job: MxJob) -> list[ObjectRef]:
        return job_refs(job)

    def owns_pod(self, pod: KubeObject) -> bool:
        return True  # the default runtime: every pod no other runtime owns

    def group_live(self, live: LiveObjects) -> Mapping[tuple[str, str], Live]:
        return group_live(live)

    def as_created(self, rendered: Sequence[KubeObject]) -> LiveObjects:
        return LiveObjects.of_objects(rendered)

    def in_place_values(self, job: MxJob) -> Mapping[str, Any]:
        return desired(job)

    def hash_shape(self, job: MxJob) -> Mapping[str, Any] | None:
        return None  # a batch job hashes as every job did before runtimes

    def name_problems(self, job: MxJob) -> list[FieldProblem]:
        return rules.name_problems(job)

    def scheduling_warnings(
        self, job: MxJob, scheduling: Mapping[str, Any], where: Path
    ) -> list[FieldProblem]:
        return rules.scheduling_warnings(job, scheduling, where)
