"""Kubeflow's failure and restart semantics, end to end (issue 21, items 1-4).

What the training operator did, and what a job migrating from it relies on:
under `Never` the first failed pod fails the job, and nothing retries it (a
restarted ps-lite worker or server does not rejoin: the job would hang holding
its GPUs); `backoffLimit` counts restarts and retried failures across the whole
job; the state a sync reads agrees with what Kubernetes does next, so it never
goes Failed and back to Running. Both backends: the API double, and the real
job controller of the real control plane.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mxgitops.kube import cluster
from tests.helpers.sync import (
    NS,
    Syncer,
    batch_job,
    delete,
    job_objects,
    mxjob,
    repo,
    run,
    states,
    summary_of,
    write,
)
from tests.kubeapi.harness import KubeAPI

__all__ = ["repo", "run"]  # fixtures from tests/helpers, used here

UNLIMITED = 2**31 - 1


def start(kubeapi: KubeAPI, run: Syncer, repo: Path, *docs: dict[str, Any]) -> None:
    """Create the jobs and run every pod of them."""
    write(repo, *docs)
    run()
    kubeapi.run_job_controller(NS)
    for doc in docs:
        for obj in job_objects(kubeapi, doc["metadata"]["name"]):
            kubeapi.kubelet(job=obj["metadata"]["name"], namespace=NS, phase="Running")


def fail(kubeapi: KubeAPI, job: str, role: str = "worker", index: int = 0, **how: Any) -> None:
    kubeapi.kubelet(job=batch_job(kubeapi, job, role, index), namespace=NS, phase="Failed", **how)


def pods_of(kubeapi: KubeAPI, batch: str) -> list[dict[str, Any]]:
    return [
        p
        for p in kubeapi.objects("pods", NS)
        if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == batch
    ]


def test_a_dist_job_whose_worker_exits_1_under_never_fails_in_one_sync_and_stops(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    start(kubeapi, run, repo, mxjob("hang", restart="Never"))
    worker = batch_job(kubeapi, "hang", "worker", 1)
    fail(kubeapi, "hang", index=1, exit_code=1)  # no termination message: it still counts
    kubeapi.settle(NS)
    outcome = run()
    job = summary_of(outcome, "hang")
    assert (job.state, job.action) == ("Failed", "stop"), job.reason
    assert job.failure is not None and job.failure["replica"] == "WORKER 1"
    # The failed worker is not retried, and every other replica was stopped.
    assert len(pods_of(kubeapi, worker)) == 1
    left = {o["metadata"]["name"] for o in job_objects(kubeapi, "hang")}
    assert left == {worker}
    failed = kubeapi.get("Job", worker, NS)
    assert failed is not None and failed["spec"]["backoffLimit"] == 0
    again = run()
    assert states(again, "hang")[0] == "Failed" and summary_of(again, "hang").action == "unchanged"


def test_the_state_agrees_with_what_kubernetes_does_next(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    """No flapping: a termination Kubernetes retries reads Running, one it does not
    reads Failed, before and after the job controller acted on it."""
    docs = [
        mxjob("oom", servers=0, restart="ExitCode"),  # 137: retried under ExitCode
        mxjob("exit3", servers=0, restart="ExitCode"),  # 1-127: the program's verdict
        mxjob("msg", servers=0, restart="Never"),  # Never: never retried
    ]
    start(kubeapi, run, repo, *docs)
    fail(kubeapi, "oom", exit_code=137, reason="OOMKilled")
    fail(kubeapi, "exit3", exit_code=3)
    fail(kubeapi, "msg", exit_code=1, message="loss is NaN")
    expected = {"oom": "Running", "exit3": "Failed", "msg": "Failed"}
    before = run(dry_run=True)
    assert {n: states(before, n)[0] for n in expected} == expected
    kubeapi.run_job_controller(NS)  # the retry of "oom" has its pod now, not yet running
    after = run()
    assert {n: states(after, n)[0] for n in expected} == expected
    assert len(pods_of(kubeapi, batch_job(kubeapi, "oom", "worker"))) == 2
    msg = kubeapi.get("Job", batch_job(kubeapi, "msg", "worker"), NS)
    assert msg is not None and len(pods_of(kubeapi, msg["metadata"]["name"])) == 1


def test_backoff_limit_counts_restarts_across_the_whole_job(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    start(kubeapi, run, repo, mxjob("flaky", workers=2, runPolicy={"backoffLimit": 2}))
    fail(kubeapi, "flaky", index=0, exit_code=1, restart_state="running")
    assert states(run(), "flaky")[0] == "Running"  # one restart of two allowed
    fail(kubeapi, "flaky", index=1, exit_code=1, restart_state="running")
    outcome = run()
    job = summary_of(outcome, "flaky")
    assert job.state == "Failed", job.reason
    assert job.failure is not None and "BackoffLimitExceeded" in job.failure["reason"]
    assert job.action == "stop"


def test_on_failure_without_backoff_limit_restarts_without_limit(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    start(kubeapi, run, repo, mxjob("forever", servers=0))
    name = batch_job(kubeapi, "forever", "worker")
    live = kubeapi.get("Job", name, NS)
    assert live is not None and live["spec"]["backoffLimit"] == UNLIMITED
    for _ in range(7):  # Kubernetes' default backoffLimit is 6
        fail(kubeapi, "forever", exit_code=1, restart_state="running")
    kubeapi.settle(NS)
    assert states(run(), "forever") == ("Running", {"WORKER": "Running"})


def test_exit_code_backoff_limit_counts_retried_failures_across_the_job(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    doc = mxjob("killed", workers=2, restart="ExitCode", runPolicy={"backoffLimit": 1})
    start(kubeapi, run, repo, doc)
    fail(kubeapi, "killed", index=0, exit_code=137)
    kubeapi.run_job_controller(NS)
    assert states(run(), "killed")[0] == "Running"  # one retry of one allowed
    fail(kubeapi, "killed", index=1, exit_code=137)
    kubeapi.settle(NS)
    job = summary_of(run(), "killed")
    assert job.state == "Failed", job.reason
    assert job.failure is not None and "BackoffLimitExceeded" in job.failure["reason"]


# -- disruptions that are the job's own doing (issue 43) --------------------------------

DOUBLE_EVICTS = "the double evicts a pod in one step; real evictions: tests/faults/"
OVERUSE = (
    "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. "
    "Container mxnet was using 3Gi, request is 1Gi, has larger consumption of memory. "
)


def disruption(reason: str, message: str) -> dict[str, Any]:
    return {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message}


def only_pod(kubeapi: KubeAPI, job: str, role: str = "worker", index: int = 0) -> str:
    (pod,) = pods_of(kubeapi, batch_job(kubeapi, job, role, index))
    return str(pod["metadata"]["name"])


def event_about(kubeapi: KubeAPI, pod: str, reason: str, message: str, **annotations: str) -> None:
    """A core/v1 Event about `pod`, as the component that took it away writes one."""
    metadata: dict[str, Any] = {"name": f"{pod}.e1", "namespace": NS}
    if annotations:
        metadata["annotations"] = annotations
    about = {"kind": "Pod", "name": pod, "namespace": NS, "apiVersion": "v1"}
    body = {"apiVersion": "v1", "kind": "Event", "metadata": metadata, "involvedObject": about}
    kubeapi.create({**body, "reason": reason, "message": message, "type": "Warning"}, NS)


@pytest.mark.double_only(DOUBLE_EVICTS)
def test_an_on_failure_failed_pod_garbage_collected_fails_the_job(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    """The pod garbage collector (or a cleanup script) deletes a failed pod that nothing
    took away: its batch Job still counts it, and the job has failed, as with the pod."""
    start(kubeapi, run, repo, mxjob("gc", restart="OnFailure"))
    pod = only_pod(kubeapi, "gc", index=1)
    kubeapi.evict(pod, NS, message="Pod was rejected: the node is out of memory")
    delete(kubeapi, "pods", pod)
    kubeapi.run_job_controller(NS)
    job = summary_of(run(), "gc")
    assert (job.state, job.action) == ("Failed", "stop"), job.reason
    assert job.failure is not None and job.failure["replica"] == "WORKER 1"
    assert summary_of(run(), "gc").state == "Failed"


@pytest.mark.double_only(DOUBLE_EVICTS)
def test_an_on_failure_pod_gone_with_a_preemption_event_runs_again_whole(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    start(kubeapi, run, repo, mxjob("pre", restart="OnFailure"))
    pod = only_pod(kubeapi, "pre", index=1)
    kubeapi.evict(pod, NS, message="", condition=disruption("PreemptionByScheduler", "preempt"))
    event_about(kubeapi, pod, "Preempted", "Preempted by pod 0f3c on node n2")
    delete(kubeapi, "pods", pod)
    job = summary_of(run(), "pre")
    assert (job.state, job.action) == ("Pending", "replace"), job.reason
    assert "WORKER 1 preempted on node n2" in job.reason


@pytest.mark.double_only(DOUBLE_EVICTS)
def test_a_kubelet_eviction_is_the_jobs_failure_only_with_kubernetes_evidence(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    start(kubeapi, run, repo, mxjob("own", restart="Never"), mxjob("node", restart="Never"))
    for name, message in (("own", OVERUSE), ("node", "The node was low on resource: memory. ")):
        condition = disruption("TerminationByKubelet", message)
        kubeapi.evict(only_pod(kubeapi, name, index=1), NS, message=message, condition=condition)
    kubeapi.run_job_controller(NS)
    outcome = run()
    own, node = summary_of(outcome, "own"), summary_of(outcome, "node")
    assert (own.state, own.action) == ("Failed", "stop"), own.reason
    assert own.failure is not None and "using 3Gi, request is 1Gi" in own.failure["message"]
    assert (node.state, node.action) == ("Pending", "replace"), node.reason
    assert "WORKER 1 evicted by the kubelet of node" in node.reason


@pytest.mark.double_only(DOUBLE_EVICTS)
def test_consecutive_disruptions_past_the_bound_fail_the_job_listing_them(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    """--max-disruption-runs 1: one re-run; the second disruption in a row fails it."""
    start(kubeapi, run, repo, mxjob("node", restart="Never"))
    taint = disruption("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")
    reasons = []
    for index in (0, 1):
        kubeapi.evict(only_pod(kubeapi, "node", index=index), NS, message="", condition=taint)
        kubeapi.run_job_controller(NS)
        job = summary_of(run(max_disruption_runs=1), "node")
        reasons.append(job.reason)
        kubeapi.run_job_controller(NS)
        for obj in job_objects(kubeapi, "node"):
            kubeapi.kubelet(job=obj["metadata"]["name"], namespace=NS, phase="Running")
    assert reasons[0].startswith("disrupted, not failed: WORKER 0 evicted"), reasons
    assert (job.state, job.action) == ("Failed", "stop"), job.reason
    assert job.failure is not None and job.failure["reason"] == "DisruptionRunsExceeded"
    message = job.failure["message"]
    assert message.startswith("disrupted 2 times in a row, past --max-disruption-runs 1:")
    assert "WORKER 0 evicted" in message and "WORKER 1 evicted" in message
    assert summary_of(run(max_disruption_runs=1), "node").state == "Failed"


def test_the_server_selects_the_events_of_counted_pods_gone_by_reason(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    """The Events of an OnFailure batch Job's gone pods are listed by reason, with a
    field selector only the server's Event strategy knows (`involvedObject.kind`,
    `reason`): the real server judges it."""
    start(kubeapi, run, repo, mxjob("sel", restart="OnFailure"))
    worker = batch_job(kubeapi, "sel", "worker", 1)
    event_about(kubeapi, f"{worker}-gone1", "Preempted", "Preempted by pod 0f3c on node n2")
    event_about(kubeapi, f"{worker}-gone2", "Scheduled", "Successfully assigned")
    event_about(kubeapi, "someone-else-x1", "Preempted", "Preempted by pod 0f3c on node n2")
    counted = {
        "metadata": {
            "name": worker,
            "namespace": NS,
            "annotations": {"mxgitops.io/restart-policy": "OnFailure"},
        },
        "status": {"failed": 1},
    }
    found = cluster.connect(kubeconfig=kubeapi.kubeconfig)._counted_pod_events([counted], [])
    assert [(e["involvedObject"]["name"], e["reason"]) for e in found] == [
        (f"{worker}-gone1", "Preempted")
    ]
