"""Helpers of `tests/planning/test_plan.py` that other test modules use too."""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime
from typing import Any

from mxgitops import model
from mxgitops.manifests import spec
from mxgitops.objects import KubeObject, LiveObjects, ObjectRef
from mxgitops.planning.changes import Plan, PlanOptions
from mxgitops.planning.ledger import Ledger
from mxgitops.runtimes.batch.render import render_job

NS = "ml"


OPTIONS = PlanOptions(instance="t1", now=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))


CTX = OPTIONS.render_context()


# The ledger of an instance that has only ever run batch Jobs (it records so): a plan
# that changes nothing of it writes nothing.
BATCH = frozenset({"batch"})


BATCH_ONLY = Ledger(runtimes=BATCH)


COMPLETE = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}


def job(
    name: str,
    *,
    workers: int = 2,
    servers: int = 1,
    annotations: dict[str, str] | None = None,
    restart: str | None = None,
    **run_policy: Any,
) -> model.MxJob:
    def replica(count: int) -> dict[str, Any]:
        container = {"name": "mxnet", "image": "mxnet/python:1.9.1"}
        one = {"replicas": count, "template": {"spec": {"containers": [container]}}}
        return {**one, "restartPolicy": restart} if restart else one

    replicas = {"Worker": replica(workers)}
    if servers:
        replicas = {"Scheduler": replica(1), "Server": replica(servers), **replicas}
    metadata: dict[str, Any] = {"name": name, "namespace": NS}
    if annotations:
        metadata["annotations"] = annotations
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": metadata,
        "spec": {"jobMode": "MXTrain", "mxReplicaSpecs": replicas, **run_policy},
    }
    return dataclasses.replace(spec.from_manifest(doc), source_path=f"jobs/{name}.yaml")


WAIT = {model.ON_CHANGE_ANNOTATION: "wait"}


def live(*jobs: model.MxJob, status: dict[str, Any] | None = None) -> LiveObjects:
    """The rendered objects of `jobs` as a LIST returns them; `status` on every batch Job."""
    objects = [o for j in jobs for o in render_job(j, CTX)]
    batch = tuple(
        {**o, "status": copy.deepcopy(status or {})} for o in objects if o["kind"] == "Job"
    )
    return LiveObjects(jobs=batch, services=tuple(o for o in objects if o["kind"] == "Service"))


def finish(objects: LiveObjects, role: str, condition: dict[str, Any] = COMPLETE) -> LiveObjects:
    """Mark every batch Job of `role` (e.g. "-scheduler-") finished."""
    return dataclasses.replace(
        objects,
        jobs=tuple(
            {**o, "status": condition} if role in o["metadata"]["name"] else o for o in objects.jobs
        ),
    )


def without(objects: LiveObjects, *gone: KubeObject) -> LiveObjects:
    drop = {ObjectRef.of(o) for o in gone}
    return LiveObjects(
        tuple(o for o in objects.jobs if ObjectRef.of(o) not in drop),
        tuple(o for o in objects.services if ObjectRef.of(o) not in drop),
    )


def only(result: Plan) -> Any:
    (change,) = result.changes
    return change
