"""MXReplicaSet: the seed's handle on one replica set of a running job.

A thin façade: rendering and status rules live in `render` and `status`;
this class only pairs them with a `ClusterAPI`, the way the seed's
MXReplicaSet paired them with a Kubernetes clientset.
"""

from __future__ import annotations

from typing import Protocol

from mxgitops.model import MxJob, ReplicaSpec
from mxgitops.objects import ClusterAPI, KubeObject, ObjectRef
from mxgitops.runtimes.batch.render import render_replica_set
from mxgitops.runtimes.batch.status import JobShape, in_namespace, replica_set_status
from mxgitops.runtimes.shared.labels import KubernetesLabels, replica_set_labels
from mxgitops.runtimes.shared.podtemplate import RenderContext
from mxgitops.runtimes.shared.state import MxReplicaStatus


class MXReplicaSetInterface(Protocol):
    """What a set of replicas of one role can do (the seed's MXReplicaSetInterface)."""

    def create(self) -> None: ...

    def delete(self) -> None: ...

    def get_status(self) -> MxReplicaStatus: ...


class MXReplicaSet:
    """All replicas of one role (scheduler, server or worker) of one job."""

    def __init__(
        self, cluster: ClusterAPI, spec: ReplicaSpec, job: MxJob, ctx: RenderContext
    ) -> None:
        self.cluster = cluster
        self.spec = spec
        self.job = job
        self.context = ctx

    def labels(self) -> KubernetesLabels:
        """Labels on every object of this replica set (without task_index)."""
        return replica_set_labels(self.job, self.context.instance, self.spec.type)

    def objects(self) -> list[KubeObject]:
        return render_replica_set(self.job, self.spec, self.context)

    def create(self) -> None:
        self.cluster.create(self.objects())

    def delete(self) -> None:
        """Delete the batch Jobs (their pods follow) and, for the scheduler, the Service."""
        self.cluster.delete([ObjectRef.of(o) for o in self.objects()])

    def get_status(self) -> MxReplicaStatus:
        live = self.cluster.list_live(self.labels().to_selector())
        return replica_set_status(
            JobShape.of(self.job),
            self.spec.type,
            self.spec.replicas,
            in_namespace(live, self.job.namespace),
        )
