"""The JobSet runtime as the registry sees it (`runtime/base.py`'s `Runtime`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mxgitops.jobset.live import created_jobsets, group_live_jobsets, is_jobset_pod
from mxgitops.jobset.render import jobset_refs, recorded_in_place, render_jobset
from mxgitops.model import MxJob, Runtime
from mxgitops.objects import Kind, KubeObject, LiveObjects, ObjectRef
from mxgitops.runtime.base import Live
from mxgitops.runtime.rendering import RenderContext


class JobSetRuntime:
    """One JobSet per job, admitted whole by Kueue when the job names a queue."""

    name = Runtime.JOBSET.value
    kinds = frozenset({Kind.JOBSET, Kind.WORKLOAD, Kind.POD})
    own_kinds = frozenset({Kind.JOBSET})

    def render(self, job: MxJob, ctx: RenderContext) -> list[KubeObject]:
        return render_jobset(job, ctx)

    def refs(self, job: MxJob) -> list[ObjectRef]:
        return jobset_refs(job)

    def owns_pod(self, pod: KubeObject) -> bool:
        return is_jobset_pod(pod)

    def group_live(self, live: LiveObjects) -> Mapping[tuple[str, str], Live]:
        return group_live_jobsets(live.of(Kind.JOBSET), live.pods, live.of(Kind.WORKLOAD))

    def as_created(self, rendered: Sequence[KubeObject]) -> LiveObjects:
        jobsets, workloads = created_jobsets([o for o in rendered if o["kind"] == Kind.JOBSET])
        return LiveObjects.of_objects([*jobsets, *workloads])

    def in_place_values(self, job: MxJob) -> Mapping[str, Any]:
        return recorded_in_place(job)
