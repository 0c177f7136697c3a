"""The JobSet runtime as the registry sees it (`runtime/base.py`'s `Runtime`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mxgitops import objects
from mxgitops.model import FieldProblem, MxJob, Path
from mxgitops.objects import Kind, KubeObject, Listing, LiveObjects, ObjectRef
from mxgitops.runtimes.jobset import rules
from mxgitops.runtimes.jobset.grouping import created_jobsets, group_live_jobsets, is_jobset_pod
from mxgitops.runtimes.jobset.kinds import (
    JOBSET,
    MULTIKUEUE_CLUSTER,
    WORKLOAD,
    WORKLOAD_PRIORITY_CLASS,
)
from mxgitops.runtimes.jobset.render import jobset_refs, recorded_in_place, render_jobset
from mxgitops.runtimes.shared import scheduling
from mxgitops.runtimes.shared.base import Live
from mxgitops.runtimes.shared.podtemplate import RenderContext


class JobSetRuntime:
    """One JobSet per job, admitted whole by Kueue when the job names a queue."""

    name = "jobset"
    kinds = frozenset({JOBSET, WORKLOAD, MULTIKUEUE_CLUSTER, Kind.POD})
    own_kinds = frozenset({JOBSET})
    listings = (
        Listing(JOBSET),
        # Kueue labels no Workload with ours: all of them, and only when one is needed.
        Listing(WORKLOAD, selected=False, only_if=lambda live: any(map(_queued, live.of(JOBSET)))),
        # Whether this cluster, a MultiKueue manager, reaches the worker a Workload runs
        # on; none read where the ClusterRole does not grant their LIST (an installation
        # from before it did): the jobs are read as before, without the word.
        Listing(
            MULTIKUEUE_CLUSTER,
            selected=False,
            only_if=lambda live: any(map(_dispatched, live.of(WORKLOAD))),
            if_forbidden="not allowed to list MultiKueueClusters: unreachable workers go unsaid",
        ),
    )

    def names_needed(self, jobs: Sequence[MxJob]) -> frozenset[Kind]:
        # A queued job's priority class is given to Kueue by name where one exists.
        named = any(job.queue and job.priority_class for job in jobs)
        return frozenset({WORKLOAD_PRIORITY_CLASS}) if named else frozenset()

    def render(self, job: MxJob, ctx: RenderContext) -> list[KubeObject]:
        return render_jobset(job, ctx)

    def refs(self, job: MxJob) -> list[ObjectRef]:
        return jobset_refs(job)

    def owns_pod(self, pod: KubeObject) -> bool:
        return is_jobset_pod(pod)

    def group_live(self, live: LiveObjects) -> Mapping[tuple[str, str], Live]:
        return group_live_jobsets(
            live.of(JOBSET), live.pods, live.of(WORKLOAD), live.of(MULTIKUEUE_CLUSTER)
        )

    def as_created(self, rendered: Sequence[KubeObject]) -> LiveObjects:
        jobsets, workloads = created_jobsets([o for o in rendered if o["kind"] == JOBSET])
        return LiveObjects.of_objects([*jobsets, *workloads])

    def in_place_values(self, job: MxJob) -> Mapping[str, Any]:
        return recorded_in_place(job)

    def hash_shape(self, job: MxJob) -> Mapping[str, Any] | None:
        return rules.hash_shape(job)

    def name_problems(self, job: MxJob) -> list[FieldProblem]:
        return rules.name_problems(job)

    def scheduling_warnings(
        self, job: MxJob, scheduling: Mapping[str, Any], where: Path
    ) -> list[FieldProblem]:
        return rules.scheduling_warnings(job, scheduling, where)


def _queued(jobset: KubeObject) -> bool:
    """A JobSet Kueue queues: it has a Workload, which says why it waits."""
    return scheduling.QUEUE_LABEL in objects.labels_of(jobset)


def _dispatched(workload: KubeObject) -> bool:
    """A Workload MultiKueue runs on a worker cluster (`status.clusterName`)."""
    return bool((workload.get("status") or {}).get("clusterName"))
