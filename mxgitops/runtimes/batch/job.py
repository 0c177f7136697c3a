"""TrainingJob: the seed's handle on one job in a cluster.

It renders with `render_job`, writes through a `ClusterAPI`, and judges state
with `job_status`, so it behaves exactly like the reconciler's plan/apply path;
it exists for callers that want the seed's object-oriented API (one job at a
time, e.g. scripts and tests).
"""

from __future__ import annotations

from mxgitops.model import MxJob
from mxgitops.objects import ClusterAPI, KubeObject, ObjectRef
from mxgitops.runtimes.batch.render import render_job
from mxgitops.runtimes.batch.replicaset import MXReplicaSet
from mxgitops.runtimes.batch.status import in_namespace, job_status
from mxgitops.runtimes.shared.labels import KubernetesLabels, job_labels
from mxgitops.runtimes.shared.podtemplate import RenderContext
from mxgitops.runtimes.shared.state import MxReplicaStatus, State


class TrainingJob:
    """One MxJob, its replica sets, and the cluster they live in."""

    def __init__(self, job: MxJob, cluster: ClusterAPI, ctx: RenderContext) -> None:
        self.cluster = cluster
        self.context = ctx
        self.job = job
        self.replicas: list[MXReplicaSet] = self._replica_sets(job)

    def labels(self) -> KubernetesLabels:
        """Labels on every object of this runtime of the job."""
        return job_labels(self.job, self.context.instance)

    def objects(self) -> list[KubeObject]:
        return render_job(self.job, self.context)

    def create(self) -> None:
        """Create every object of the job in one call (idempotent, names are deterministic)."""
        self.cluster.create(self.objects())

    def delete(self) -> None:
        self.cluster.delete([ObjectRef.of(o) for o in self.objects()])

    def get_status(self) -> tuple[State, list[MxReplicaStatus]]:
        """One LIST with this runtime's selector, then the pure status rules."""
        live = self.cluster.list_live(self.labels().to_selector())
        return job_status(self.job, in_namespace(live, self.job.namespace))

    def update(self, new_job: MxJob) -> None:
        """Replace the job by `new_job`: delete the old runtime's objects, create the new ones.

        With the same runtime id the objects would keep their names; deleting
        and recreating them would race with the cluster's asynchronous
        deletion, so then nothing is written and only the handle is updated.
        """
        if new_job.key != self.job.key:
            raise ValueError(
                f"update cannot turn job {self.job.namespace}/{self.job.name} into "
                f"{new_job.namespace}/{new_job.name}; delete one and create the other"
            )
        replace = new_job.runtime_id != self.job.runtime_id
        if replace:
            self.delete()
        self.job = new_job
        self.replicas = self._replica_sets(new_job)
        if replace:
            self.create()

    def _replica_sets(self, job: MxJob) -> list[MXReplicaSet]:
        return [MXReplicaSet(self.cluster, spec, job, self.context) for spec in job.replica_specs]
