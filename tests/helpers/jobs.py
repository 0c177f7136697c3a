"""Jobs and live objects for the pure tests: a job's manifest, its rendered and
finished objects, batch Jobs and pods in any state, the plan's context."""

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


def terminated(code: int, message: str = "", reason: str = "") -> dict[str, Any]:
    state: dict[str, Any] = {"exitCode": code}
    if message:
        state["message"] = message
    if reason:
        state["reason"] = reason
    return {"terminated": state}


RUNNING = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}


def pod(
    state: dict[str, Any] | None = None,
    *,
    last: dict[str, Any] | None = None,
    started: str | None = "2026-01-01T00:00:00Z",
    created: str = "2026-01-01T00:00:00Z",
    name: str = "p",
    container: str = "mxnet",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if started:
        status["startTime"] = started
    if state is not None:
        entry: dict[str, Any] = {"name": container, "state": state}
        if last is not None:
            entry["lastState"] = last
        status["containerStatuses"] = [entry]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "creationTimestamp": created, "labels": labels or {}},
        "status": status,
    }


def batch_job(
    succeeded: int = 0,
    conditions: list[dict[str, str]] | None = None,
    *,
    restart: model.RestartPolicy | None = None,
    failed: int = 0,
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if succeeded:
        status["succeeded"] = succeeded
    if failed:
        status["failed"] = failed
    if conditions:
        status["conditions"] = conditions
    metadata: dict[str, Any] = {"name": "j"}
    if restart is not None:
        metadata["annotations"] = {"mxgitops.io/restart-policy": restart.value}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "status": status}


NEVER, ON_FAILURE, EXIT_CODE = (model.RestartPolicy(p) for p in ("Never", "OnFailure", "ExitCode"))


def failed_pod(state: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    failed = pod(state, **kwargs)
    failed["status"]["phase"] = "Failed"
    return failed
