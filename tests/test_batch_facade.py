"""TrainingJob and MXReplicaSet against an in-memory ClusterAPI (the real one: elsewhere)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest

from mxgitops import model
from mxgitops.manifests import spec
from mxgitops.objects import ClusterAPI, Kind, KubeObject, LiveObjects, ObjectRef
from mxgitops.runtimes.batch.job import TrainingJob
from mxgitops.runtimes.batch.render import render_job
from mxgitops.runtimes.batch.replicaset import MXReplicaSet, MXReplicaSetInterface
from mxgitops.runtimes.shared.podtemplate import RenderContext
from mxgitops.runtimes.shared.state import ReplicaState, State

CTX = RenderContext(instance="prod", commit="c0ffee")


class FakeCluster:
    """A dict of objects by ref; create and delete are idempotent, like `ClusterAPI` promises.

    Deleting a Job deletes its pods (background propagation); `run_pods` plays the
    Job controller, creating one pod per Job from its template.
    """

    def __init__(self) -> None:
        self.objects: dict[ObjectRef, KubeObject] = {}
        self.created: list[list[KubeObject]] = []
        self.deleted: list[list[ObjectRef]] = []
        self.selectors: list[str] = []

    def create(self, objects: Sequence[KubeObject]) -> None:
        self.created.append([copy.deepcopy(o) for o in objects])
        for obj in objects:
            self.objects.setdefault(ObjectRef.of(obj), copy.deepcopy(obj))

    def delete(self, refs: Sequence[ObjectRef]) -> None:
        self.deleted.append(list(refs))
        for ref in refs:
            self.objects.pop(ref, None)
            if ref.kind is Kind.JOB:
                for pod_ref in [r for r, o in self.objects.items() if _pod_of(o, ref)]:
                    del self.objects[pod_ref]

    def list_live(self, selector: str) -> LiveObjects:
        self.selectors.append(selector)
        wanted = dict(part.split("=", 1) for part in selector.split(",") if part)

        def matching(kind: Kind) -> tuple[KubeObject, ...]:
            return tuple(
                copy.deepcopy(o)
                for ref, o in sorted(self.objects.items())
                if ref.kind is kind
                and all(o["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())
            )

        return LiveObjects(matching(Kind.JOB), matching(Kind.SERVICE), matching(Kind.POD))

    def names(self, kind: Kind) -> set[str]:
        return {ref.name for ref in self.objects if ref.kind is kind}

    def run_pods(self, state: dict[str, Any]) -> None:
        for ref in list(self.objects):
            if ref.kind is Kind.JOB:
                self.set_pod(ref.name, state)

    def set_pod(self, job_name: str, state: dict[str, Any]) -> None:
        job = self.objects[ObjectRef(Kind.JOB, _namespace_of(self, job_name), job_name)]
        labels = {**job["spec"]["template"]["metadata"]["labels"], "job-name": job_name}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{job_name}-abcde",
                "namespace": job["metadata"]["namespace"],
                "labels": labels,
            },
            "status": {
                "startTime": "2026-01-01T00:00:00Z",
                "containerStatuses": [{"name": "mxnet", "state": state}],
            },
        }
        self.objects[ObjectRef.of(pod)] = pod

    def succeed(self, job_name: str) -> None:
        job = self.objects[ObjectRef(Kind.JOB, _namespace_of(self, job_name), job_name)]
        job["status"] = {"succeeded": 1}


def _namespace_of(cluster: FakeCluster, job_name: str) -> str:
    return next(r.namespace for r in cluster.objects if r.kind is Kind.JOB and r.name == job_name)


def _pod_of(obj: KubeObject, job: ObjectRef) -> bool:
    metadata = obj["metadata"]
    return bool(
        obj["kind"] == "Pod"
        and metadata["namespace"] == job.namespace
        and metadata["labels"].get("job-name") == job.name
    )


RUNNING: dict[str, Any] = {"running": {}}
DONE: dict[str, Any] = {"terminated": {"exitCode": 0}}


def dist(workers: int = 2, namespace: str = "ml") -> model.MxJob:
    template = {"spec": {"containers": [{"name": "mxnet", "image": "mxnet"}]}}
    return spec.from_manifest(
        {
            "apiVersion": model.SEED_API_VERSION,
            "kind": model.SEED_KIND,
            "metadata": {"name": "mnist", "namespace": namespace},
            "spec": {
                "jobMode": "dist",
                "replicaSpecs": [
                    {"replicas": 1, "mxReplicaType": "SCHEDULER", "template": template},
                    {"replicas": 1, "mxReplicaType": "SERVER", "template": template},
                    {"replicas": workers, "mxReplicaType": "WORKER", "template": template},
                ],
            },
        }
    )


def test_the_fake_is_a_cluster_api_and_replica_sets_fit_the_interface() -> None:
    cluster: ClusterAPI = FakeCluster()
    training = TrainingJob(dist(), cluster, CTX)
    replica_set: MXReplicaSetInterface = training.replicas[0]
    assert isinstance(replica_set, MXReplicaSet)


def test_create_creates_exactly_the_rendered_objects_and_is_idempotent() -> None:
    cluster = FakeCluster()
    job = dist()
    training = TrainingJob(job, cluster, CTX)
    training.create()
    assert cluster.created == [render_job(job, CTX)]
    assert sorted(cluster.objects) == sorted(ObjectRef.of(o) for o in render_job(job, CTX))
    before = copy.deepcopy(cluster.objects)
    training.create()
    assert cluster.objects == before


def test_replica_sets_follow_the_spec_and_label_their_objects() -> None:
    job = dist()
    training = TrainingJob(job, FakeCluster(), CTX)
    assert [r.spec.type for r in training.replicas] == list(model.ReplicaType)
    labels = training.replicas[2].labels()
    assert labels == {
        "app.kubernetes.io/managed-by": "mxgitops",
        "mxgitops.io/instance": "prod",
        "mxgitops.io/job": "mnist",
        "mxnet.mlkube.io": "",
        "runtime_id": job.runtime_id,
        "job_type": "WORKER",
    }
    assert labels.to_selector() == (
        "app.kubernetes.io/managed-by=mxgitops,job_type=WORKER,mxgitops.io/instance=prod,"
        f"mxgitops.io/job=mnist,mxnet.mlkube.io=,runtime_id={job.runtime_id}"
    )


def test_replica_set_create_and_delete_touch_only_its_objects() -> None:
    cluster = FakeCluster()
    job = dist(workers=2)
    scheduler, _, workers = TrainingJob(job, cluster, CTX).replicas
    scheduler.create()
    name = model.scheduler_service_name(job)
    assert cluster.names(Kind.JOB) == {name}
    assert cluster.names(Kind.SERVICE) == {name}
    workers.create()
    assert len(cluster.names(Kind.JOB)) == 3
    scheduler.delete()
    assert cluster.names(Kind.JOB) == {
        model.job_object_name(job, model.ReplicaType.WORKER, i) for i in range(2)
    }
    assert cluster.names(Kind.SERVICE) == set()


def test_delete_deletes_every_object_and_their_pods_go_with_the_jobs() -> None:
    cluster = FakeCluster()
    training = TrainingJob(dist(), cluster, CTX)
    training.create()
    cluster.run_pods(RUNNING)
    training.delete()
    assert cluster.objects == {}
    assert all(r.kind is not Kind.POD for r in cluster.deleted[0])


def test_get_status_lists_with_the_jobs_selector() -> None:
    cluster = FakeCluster()
    job = dist(workers=2)
    training = TrainingJob(job, cluster, CTX)
    training.create()
    assert training.get_status()[0] is State.PENDING  # no pods yet: every replica Pending
    assert cluster.selectors == [training.labels().to_selector()]
    assert f"runtime_id={job.runtime_id}" in cluster.selectors[0]
    cluster.run_pods(RUNNING)
    state, statuses = training.get_status()
    assert state is State.RUNNING
    assert [(s.type, s.state) for s in statuses] == [
        (t, ReplicaState.RUNNING) for t in model.ReplicaType
    ]
    cluster.set_pod(model.job_object_name(job, model.ReplicaType.WORKER, 0), DONE)
    workers = training.replicas[2].get_status()
    assert workers.replicas_states == {ReplicaState.SUCCEEDED: 1, ReplicaState.RUNNING: 1}
    assert cluster.selectors[-1] == training.replicas[2].labels().to_selector()
    cluster.succeed(model.scheduler_service_name(job))
    assert training.get_status()[0] is State.SUCCEEDED


def test_get_status_ignores_a_same_named_job_in_another_namespace() -> None:
    cluster = FakeCluster()
    job = dist()
    twin = dist(namespace="other")
    TrainingJob(job, cluster, CTX).create()
    twin_training = TrainingJob(twin, cluster, CTX)
    twin_training.create()
    # The twin's runtime id differs (the namespace is hashed); give it ours so only
    # the namespace tells them apart.
    for ref, obj in cluster.objects.items():
        if ref.namespace == "other" and ref.kind is Kind.JOB:
            obj["status"] = {"conditions": [{"type": "Failed", "status": "True"}]}
            obj["metadata"]["labels"]["runtime_id"] = job.runtime_id
    assert TrainingJob(job, cluster, CTX).get_status()[0] is State.PENDING


def test_update_replaces_the_old_runtime_with_the_new_one() -> None:
    cluster = FakeCluster()
    old, new = dist(workers=2), dist(workers=3)
    training = TrainingJob(old, cluster, CTX)
    training.create()
    cluster.run_pods(RUNNING)
    old_refs = set(cluster.objects)
    training.update(new)
    assert old_refs.isdisjoint(cluster.objects)
    assert sorted(cluster.objects) == sorted(ObjectRef.of(o) for o in render_job(new, CTX))
    assert training.job is new
    assert [r.spec.replicas for r in training.replicas] == [1, 1, 3]
    assert all(r.job is new for r in training.replicas)


def test_update_with_the_same_spec_writes_nothing() -> None:
    cluster = FakeCluster()
    job = dist()
    training = TrainingJob(job, cluster, CTX)
    training.create()
    writes = (len(cluster.created), len(cluster.deleted))
    training.update(dist())
    assert (len(cluster.created), len(cluster.deleted)) == writes


def test_update_refuses_another_job() -> None:
    training = TrainingJob(dist(), FakeCluster(), CTX)
    with pytest.raises(ValueError, match="delete one and create the other"):
        training.update(dist(namespace="other"))
