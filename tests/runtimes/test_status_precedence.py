"""What came first decides a job that both succeeded and failed, as in Kubeflow's operator,
which acted on each pod event: once its MXJob Succeeded (the scheduler's success), a
later failure changed nothing, and once it Failed, a later success neither. A sync sees
both at once, so it reads the containers' finish times. And `ExitCode` reads the pod:
a sidecar failing the pod while `mxnet` exited 0 fails the job, as the operator's exit
code of 0 (not retryable) did. Pure: status from live objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mxgitops import model
from mxgitops.manifests import spec
from mxgitops.objects import LiveObjects
from mxgitops.runtimes.batch.status import job_status
from mxgitops.runtimes.shared.pods import pod_replica_state
from mxgitops.runtimes.shared.podtemplate import RenderContext
from mxgitops.runtimes.shared.state import ReplicaState, State

CTX = RenderContext(instance="prod")
EARLY, LATE = "2026-01-01T10:00:00Z", "2026-01-01T10:05:00Z"


def dist_job(restart: str = "Never") -> model.MxJob:
    def replica(count: int) -> dict[str, Any]:
        container = {"name": "mxnet", "image": "mxnet/python:1.9.1"}
        return {
            "replicas": count,
            "restartPolicy": restart,
            "template": {"spec": {"containers": [container]}},
        }

    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": "j", "namespace": "ml"},
        "spec": {
            "jobMode": "MXTrain",
            "mxReplicaSpecs": {"Scheduler": replica(1), "Server": replica(1), "Worker": replica(1)},
        },
    }
    return spec.from_manifest(doc)


def finished_pod(code: int, at: str, phase: str) -> dict[str, Any]:
    terminated = {"exitCode": code, "startedAt": "2026-01-01T09:00:00Z", "finishedAt": at}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "status": {
            "phase": phase,
            "startTime": "2026-01-01T09:00:00Z",
            "containerStatuses": [{"name": "mxnet", "state": {"terminated": terminated}}],
        },
    }


RUNNING_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "status": {
        "phase": "Running",
        "startTime": "2026-01-01T09:00:00Z",
        "containerStatuses": [{"name": "mxnet", "state": {"running": {}}}],
    },
}


def live(job: model.MxJob, outcomes: dict[str, tuple[int, str] | None]) -> LiveObjects:
    """Each replica's batch Job and one pod: (exit code, finished at), None running."""
    jobs, pods = [], []
    for obj in render_job_objects(job):
        role = obj["metadata"]["labels"]["job_type"].lower()
        outcome = outcomes.get(role)
        batch, pod = copy.deepcopy(obj), copy.deepcopy(RUNNING_POD)
        if outcome is not None:
            code, at = outcome
            pod = finished_pod(code, at, "Succeeded" if code == 0 else "Failed")
            if code == 0:
                batch["status"] = {"succeeded": 1, "completionTime": at}
            else:
                failed = {"type": "Failed", "status": "True", "lastTransitionTime": at}
                batch["status"] = {"failed": 1, "conditions": [failed]}
        pod["metadata"] = {
            "name": f"{obj['metadata']['name']}-x",
            "namespace": job.namespace,
            "labels": obj["spec"]["template"]["metadata"]["labels"],
        }
        jobs.append(batch)
        pods.append(pod)
    return LiveObjects(tuple(jobs), (), tuple(pods))


def render_job_objects(job: model.MxJob) -> list[dict[str, Any]]:
    from mxgitops.runtimes.batch.render import render_job

    return [o for o in render_job(job, CTX) if o["kind"] == "Job"]


@pytest.mark.parametrize(
    ("scheduler_at", "server_at", "expected"),
    [
        (EARLY, LATE, State.SUCCEEDED),  # the operator's MXJob Succeeded, and stayed so
        (LATE, EARLY, State.FAILED),
        (EARLY, EARLY, State.FAILED),  # the same second: which came first is not known
    ],
    ids=["success first", "failure first", "same second"],
)
def test_the_first_to_finish_decides(scheduler_at: str, server_at: str, expected: State) -> None:
    job = dist_job()
    objects = live(job, {"scheduler": (0, scheduler_at), "server": (1, server_at)})
    assert job_status(job, objects)[0] is expected


def test_a_failure_without_a_time_still_fails_the_job() -> None:
    job = dist_job()
    objects = live(job, {"scheduler": (0, EARLY), "server": (1, LATE)})
    for obj in (*objects.jobs, *objects.pods):
        status = obj.get("status") or {}
        status.pop("conditions", None)
        for container in status.get("containerStatuses") or []:
            container["state"].get("terminated", {}).pop("finishedAt", None)
    server_job = next(j for j in objects.jobs if j["metadata"]["labels"]["job_type"] == "SERVER")
    server_job["status"]["conditions"] = [{"type": "Failed", "status": "True"}]
    assert job_status(job, objects)[0] is State.FAILED


def test_exit_code_fails_a_pod_a_sidecar_failed_while_mxnet_exited_0() -> None:
    pod = finished_pod(0, EARLY, "Failed")
    assert pod_replica_state(pod, model.RestartPolicy.EXIT_CODE) is ReplicaState.FAILED
    job = dist_job("ExitCode")
    objects = live(job, {"worker": (1, EARLY)})
    worker_pod = next(p for p in objects.pods if "-worker-" in p["metadata"]["name"])
    worker_job = next(j for j in objects.jobs if "-worker-" in j["metadata"]["name"])
    worker_pod["status"] = finished_pod(0, EARLY, "Failed")["status"]
    worker_job["status"] = {"failed": 1, "active": 1}  # no pod failure rule for 0: retried
    retry = copy.deepcopy(RUNNING_POD)
    retry["status"]["startTime"] = LATE
    retry["metadata"] = {**worker_pod["metadata"], "name": "retry"}
    objects = LiveObjects(objects.jobs, (), (*objects.pods, retry))
    assert job_status(job, objects)[0] is State.FAILED
