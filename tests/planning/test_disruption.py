"""Disruption is not failure (issue 30): the rules, pure.

A pod Kubernetes took away (eviction, preemption, node loss: its `DisruptionTarget`
condition) is not the user's bug. Kubeflow v1.8.1 failed the job under `Never` and
`OnFailure` and gave an `ExitCode` replica a lone new pod (which hangs a ps-lite
job); mxgitops runs a disrupted job again whole and never counts it against
backoffLimit (`docs/concepts/faults.md`).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from mxgitops import model
from mxgitops.errors import ClusterForbidden
from mxgitops.kube.reads import Reads
from mxgitops.objects import LiveObjects
from mxgitops.planning.changes import Action
from mxgitops.planning.plan import plan
from mxgitops.runtimes.batch.live import group_live
from mxgitops.runtimes.batch.render import render_job
from mxgitops.runtimes.batch.status import replica_state
from mxgitops.runtimes.shared.disruption import Disruption, failed_by_disruption, pod_disruption
from mxgitops.runtimes.shared.state import ReplicaState, State
from tests.helpers.jobs import (
    BATCH_ONLY,
    CTX,
    EXIT_CODE,
    NEVER,
    NS,
    ON_FAILURE,
    OPTIONS,
    RUNNING,
    batch_job,
    failed_pod,
    job,
    pod,
    terminated,
)

TAINT = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "DeletionByTaintManager",
    "message": "Taint manager: deleting due to NoExecute taint",
}
KUBELET_EVICTION = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "TerminationByKubelet",
    "message": "The node was low on resource: memory.",
}
PREEMPTION = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "PreemptionByScheduler",
    "message": "default-scheduler: preempting to accommodate a higher priority pod",
}
# What the Job controller writes when mxgitops' rule on DisruptionTarget fails a batch Job.
FAIL_JOB = {
    "type": "Failed",
    "status": "True",
    "reason": "PodFailurePolicy",
    "message": "Pod ml/d-worker-x-1-abc has condition DisruptionTarget matching FailJob rule "
    "at index 0",
}


def disrupted(base: dict[str, Any], condition: dict[str, Any], node: str = "n1") -> dict[str, Any]:
    """`base` with a DisruptionTarget condition, on `node`."""
    changed = {**base, "spec": {"nodeName": node}, "status": dict(base["status"])}
    changed["status"]["conditions"] = [condition]
    return changed


# -- what a pod and a batch Job say ------------------------------------------------------


def test_a_pod_says_why_kubernetes_took_it_away() -> None:
    assert pod_disruption(pod(RUNNING)) is None
    assert pod_disruption(disrupted(pod(RUNNING), {**TAINT, "status": "False"})) is None
    assert pod_disruption(disrupted(pod(RUNNING), TAINT, "node-7")) == (
        "evicted: node node-7 NotReady or unreachable "
        "(DeletionByTaintManager: Taint manager: deleting due to NoExecute taint)"
    )
    assert pod_disruption(disrupted(failed_pod({}), KUBELET_EVICTION)) == (
        "evicted by the kubelet of node n1 (TerminationByKubelet: The node was low on "
        "resource: memory.)"
    )
    assert pod_disruption(disrupted(failed_pod({}), PREEMPTION)).startswith(  # type: ignore[union-attr]
        "preempted on node n1 (PreemptionByScheduler: default-scheduler: preempting"
    )


def test_a_batch_job_failed_by_the_disruption_rule_is_told_from_other_failures() -> None:
    assert failed_by_disruption(batch_job(conditions=[FAIL_JOB]))
    target = {**FAIL_JOB, "type": "FailureTarget"}  # before its pod is gone
    assert failed_by_disruption(batch_job(conditions=[target]))
    exit_code = {
        **FAIL_JOB,
        "message": "Container mxnet for pod ml/x failed with exit code 3 matching FailJob "
        "rule at index 1",
    }
    assert not failed_by_disruption(batch_job(conditions=[exit_code]))
    backoff = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
    assert not failed_by_disruption(batch_job(conditions=[backoff]))


# -- a disrupted replica is not failed ---------------------------------------------------


@pytest.mark.parametrize("restart", [NEVER, ON_FAILURE, EXIT_CODE], ids=str)
def test_a_disrupted_replica_is_not_failed_under_any_restart_policy(
    restart: model.RestartPolicy,
) -> None:
    evicted = disrupted(failed_pod(terminated(143, reason="Error")), KUBELET_EVICTION)
    assert replica_state(batch_job(restart=restart, failed=1), [evicted]) is ReplicaState.RUNNING
    gone = disrupted(pod(RUNNING), TAINT)  # still running, being deleted
    assert replica_state(batch_job(restart=restart), [gone]) is ReplicaState.RUNNING
    failed = batch_job(restart=restart, failed=1, conditions=[FAIL_JOB])
    assert replica_state(failed, [evicted]) is ReplicaState.RUNNING
    # mxnet may exit 0 on the eviction's SIGTERM: under ExitCode, not a sidecar's failure
    quit = disrupted(failed_pod(terminated(0, reason="Completed")), KUBELET_EVICTION)
    assert replica_state(batch_job(restart=restart, failed=1), [quit]) is ReplicaState.RUNNING


def test_a_failure_of_the_program_after_a_disruption_still_fails() -> None:
    evicted = disrupted(failed_pod({}, name="a", started="2026-01-01T00:00:00Z"), TAINT)
    exit_1 = failed_pod(terminated(1, "loss is NaN"), name="b", started="2026-01-01T01:00:00Z")
    backoff = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
    never = batch_job(restart=NEVER, failed=1, conditions=[backoff])
    assert replica_state(never, [evicted, exit_1]) is ReplicaState.FAILED
    assert replica_state(batch_job(restart=ON_FAILURE, failed=2), [evicted, exit_1]) is (
        ReplicaState.FAILED
    )


# -- rendering: the podFailurePolicy rule ------------------------------------------------


def rules_of(mx: model.MxJob, role: str) -> list[dict[str, Any]]:
    (batch, *_) = [
        o
        for o in render_job(mx, CTX)
        if o["kind"] == "Job" and f"-{role}-" in o["metadata"]["name"]
    ]
    return list((batch["spec"].get("podFailurePolicy") or {}).get("rules") or [])


def test_a_dist_job_fails_the_replica_on_a_disruption_so_that_it_runs_again_whole() -> None:
    for restart in ("Never", "ExitCode"):
        first, *rest = rules_of(job("d", restart=restart), "worker")
        assert first == {
            "action": "FailJob",
            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
        }
        assert [r["action"] for r in rest] == (["FailJob"] if restart == "ExitCode" else [])


def test_a_local_job_lets_kubernetes_replace_its_one_pod_uncounted() -> None:
    local = job("l", servers=0, workers=1, restart="Never")
    assert rules_of(local, "worker") == [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    ]


def test_on_failure_pods_get_no_pod_failure_policy() -> None:
    """Kubernetes allows one only with restartPolicy Never."""
    assert rules_of(job("o", restart="OnFailure"), "worker") == []


# -- planning: a disrupted dist job is replaced whole, with the reason -------------------


def live_with(mx: model.MxJob, role: str, index: int, pods: list[dict[str, Any]], **status: Any):
    objs = render_job(mx, CTX)
    jobs = []
    for o in objs:
        if o["kind"] != "Job":
            continue
        o = {**o, "status": {}}
        if o["metadata"]["name"].endswith(f"-{role}-{mx.runtime_id}-{index}"):
            o["status"] = status
            labels = o["spec"]["template"]["metadata"]["labels"]
            pods = [
                {**p, "metadata": {**p["metadata"], "namespace": NS, "labels": labels}}
                for p in pods
            ]
        jobs.append(o)
    return LiveObjects(
        jobs=tuple(jobs),
        services=tuple(o for o in objs if o["kind"] == "Service"),
        pods=tuple(pods),
    )


@pytest.mark.parametrize("restart", ["Never", "OnFailure", "ExitCode"])
@pytest.mark.parametrize("backoff", [None, 0])
def test_a_disrupted_dist_job_is_replaced_whole_and_not_counted(
    restart: str, backoff: int | None
) -> None:
    run_policy = {} if backoff is None else {"runPolicy": {"backoffLimit": backoff}}
    mx = job("d", restart=restart, **run_policy)
    evicted = disrupted(failed_pod(terminated(137, reason="Error"), name="w1"), TAINT, "node-7")
    conditions = [FAIL_JOB] if restart != "OnFailure" else []
    objects = live_with(mx, "worker", 1, [evicted], failed=1, conditions=conditions)
    change = next(c for c in plan([mx], objects, BATCH_ONLY, OPTIONS).changes)
    assert change.action is Action.REPLACE, change.reason
    assert change.state is State.PENDING
    assert change.reason.startswith(
        "disrupted, not failed: WORKER 1 evicted: node node-7 NotReady or unreachable"
    ), change.reason
    assert "runs again whole" in change.reason and "backoffLimit" in change.reason
    every = {o["metadata"]["name"] for o in render_job(mx, CTX)}
    assert {r.name for r in change.deletes} == every
    assert {o["metadata"]["name"] for o in change.creates} == every
    assert change.starts_after_deletes
    assert change.failure is None


def test_a_disrupted_dist_job_known_only_by_its_failed_batch_job_is_replaced() -> None:
    """The pod went with its node (the taint manager deleted it): the batch Job's
    condition is what is left."""
    mx = job("d", restart="Never")
    objects = live_with(mx, "server", 0, [], failed=1, conditions=[FAIL_JOB])
    change = only_change(mx, objects)
    assert change.action is Action.REPLACE
    assert change.reason.startswith("disrupted, not failed: SERVER 0 lost its pod "), change.reason


def test_a_gone_pod_is_said_preempted_by_the_schedulers_event_about_it() -> None:
    """A preempted pod is gone within seconds: the scheduler's Event about it says how."""
    mx = job("d", restart="Never")
    objects = live_with(mx, "server", 0, [], failed=1, conditions=[FAIL_JOB])
    (server,) = [j for j in objects.jobs if "-server-" in j["metadata"]["name"]]
    event = {
        "metadata": {"namespace": NS, "name": "e1"},
        "involvedObject": {"kind": "Pod", "name": f"{server['metadata']['name']}-x7k2p"},
        "reason": "Preempted",
        "message": "Preempted by pod 0f3c on node n2",
    }
    noise = {**event, "reason": "Scheduled", "message": "Successfully assigned"}
    objects = dataclasses.replace(objects, pod_events=(noise, event))
    change = only_change(mx, objects)
    assert change.action is Action.REPLACE
    assert change.reason.startswith(
        "disrupted, not failed: SERVER 0 preempted on node n2 "
        "(PreemptionByScheduler: Preempted by pod 0f3c on node n2); the job runs again whole"
    ), change.reason


def test_the_events_of_a_gone_pod_are_read_only_for_it_and_only_then() -> None:
    """One field-selected LIST of the gone pod's Events, kept only those that say how it
    went; none while the pod is there; none readable (403): nothing, the sync goes on."""
    asked: list[tuple[str, dict[str, str]]] = []
    answer: list[Any] = []

    def call(method: str, path: str, *, query: dict[str, str], **_: Any) -> Any:
        asked.append((path, query))
        if isinstance(answer[0], Exception):
            raise answer[0]
        return answer[0]

    reads = Reads(api_client=None)  # type: ignore[arg-type]
    reads._call = call  # type: ignore[assignment, method-assign]
    failed = [batch_job(conditions=[FAIL_JOB])]
    preempted = {"reason": "Preempted", "message": "Preempted by pod u on node n2"}
    answer.append({"items": [{"reason": "Scheduled"}, preempted]})
    assert reads._departed_pod_events(failed, []) == (preempted,)
    selector = "involvedObject.kind=Pod,involvedObject.name=d-worker-x-1-abc"
    assert asked == [("/api/v1/namespaces/ml/events", {"fieldSelector": selector})]
    here = {"metadata": {"namespace": "ml", "name": "d-worker-x-1-abc"}}
    assert reads._departed_pod_events(failed, [here]) == () and len(asked) == 1
    answer[0] = ClusterForbidden("events is forbidden")
    assert reads._departed_pod_events(failed, []) == ()


def test_the_events_of_on_failure_pods_counted_and_gone_are_read_by_reason() -> None:
    """Nothing names an OnFailure pod its batch Job counted and that is gone: one LIST
    per namespace of the Events of each reason that says how a pod was taken away, kept
    only those about a pod of such a batch Job; none while every counted pod is there."""
    asked: list[tuple[str, dict[str, str]]] = []

    def call(method: str, path: str, *, query: dict[str, str], **_: Any) -> Any:
        asked.append((path, query))
        reason = query["fieldSelector"].rpartition("=")[2]
        items = [
            {"reason": reason, "involvedObject": {"kind": "Pod", "name": f"{owner}-x1"}}
            for owner in ("j", "jx", "other")
        ]
        return {"items": items}

    reads = Reads(api_client=None)  # type: ignore[arg-type]
    reads._call = call  # type: ignore[assignment, method-assign]
    counted = batch_job(restart=ON_FAILURE, failed=1)
    counted["metadata"]["namespace"] = "ml"
    found = reads._departed_pod_events([counted], [])
    assert sorted(e["reason"] for e in found) == ["Evicted", "Preempted", "TaintManagerEviction"]
    assert {e["involvedObject"]["name"] for e in found} == {"j-x1"}
    assert asked == [
        (
            "/api/v1/namespaces/ml/events",
            {"fieldSelector": f"involvedObject.kind=Pod,reason={reason}", "limit": "500"},
        )
        for reason in ("Preempted", "TaintManagerEviction", "Evicted")
    ]
    kept = failed_pod({}, name="j-abc")
    kept["metadata"].update(namespace="ml", labels={"batch.kubernetes.io/job-name": "j"})
    asked.clear()
    assert reads._departed_pod_events([counted], [kept]) == () and asked == []
    never = batch_job(restart=NEVER, failed=1)
    never["metadata"]["namespace"] = "ml"
    assert reads._departed_pod_events([never], []) == () and asked == []


def test_a_local_job_is_left_to_kubernetes_which_replaces_its_pod() -> None:
    mx = job("l", servers=0, workers=1, restart="Never")
    evicted = disrupted(failed_pod({}), KUBELET_EVICTION)
    objects = live_with(mx, "worker", 0, [evicted])
    change = only_change(mx, objects)
    assert (change.action, change.state) == (Action.UNCHANGED, State.RUNNING)


def test_a_finished_dist_job_is_not_run_again_for_an_old_disruption() -> None:
    mx = job("d", restart="Never")
    objects = live_with(mx, "worker", 1, [disrupted(failed_pod({}), TAINT)], failed=1)
    done = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
    objects = dataclasses.replace(
        objects,
        jobs=tuple(
            {**o, "status": done} if "-scheduler-" in o["metadata"]["name"] else o
            for o in objects.jobs
        ),
    )
    change = only_change(mx, objects)
    assert change.state is State.SUCCEEDED and change.action is not Action.REPLACE


def test_the_runtime_reads_the_disruption_back() -> None:
    mx = job("d", restart="Never")
    objects = live_with(mx, "worker", 1, [disrupted(failed_pod({}), TAINT)], failed=1)
    (live,) = group_live(objects).values()
    assert live.disruption() == Disruption(
        "WORKER 1",
        "evicted: node n1 NotReady or unreachable "
        "(DeletionByTaintManager: Taint manager: deleting due to NoExecute taint)",
    )
    assert live.status()[0] is State.RUNNING


def only_change(mx: model.MxJob, objects: LiveObjects) -> Any:
    (change,) = plan([mx], objects, BATCH_ONLY, OPTIONS).changes
    return change


def test_an_on_failure_counted_pod_gone_without_a_record_is_the_jobs_failure() -> None:
    """Under OnFailure a failed pod fails the job (Kubeflow's rule). The pod garbage
    collector and cleanup scripts delete failed pods: a counted pod that is gone, with no
    Event saying Kubernetes took it away, is that failure, not a disruption."""
    replacement = pod(RUNNING, name="new")
    assert replica_state(batch_job(restart=ON_FAILURE, failed=1), [replacement]) is (
        ReplicaState.FAILED
    )
    mx = job("o", restart="OnFailure")
    objects = live_with(mx, "worker", 0, [replacement], failed=1)
    change = only_change(mx, objects)
    assert (change.state, change.action) == (State.FAILED, Action.STOP), change.reason
    kept = failed_pod(terminated(1, "boom"), name="old", started="2025-12-31T00:00:00Z")
    objects = live_with(mx, "worker", 0, [kept, replacement], failed=1)
    assert only_change(mx, objects).state is State.FAILED


def gone_pod_event(objects: LiveObjects, role: str, index: int = 0, **event: Any) -> LiveObjects:
    """`objects` with a core/v1 Event about a gone pod of the batch Job of `role` `index`."""
    (owner,) = [j for j in objects.jobs if re.search(f"-{role}-.*-{index}$", j["metadata"]["name"])]
    about = {"kind": "Pod", "name": f"{owner['metadata']['name']}-x7k2p", "namespace": NS}
    metadata = {"namespace": NS, "name": "e1", **event.pop("metadata", {})}
    found = {"metadata": metadata, "involvedObject": about, **event}
    return dataclasses.replace(objects, pod_events=(*objects.pod_events, found))


def test_an_on_failure_counted_pod_gone_with_a_preemption_event_was_disrupted() -> None:
    mx = job("o", restart="OnFailure")
    objects = live_with(mx, "worker", 0, [pod(RUNNING, name="new")], failed=1)
    preempted = gone_pod_event(
        objects, "worker", reason="Preempted", message="Preempted by pod 0f3c on node n2"
    )
    change = only_change(mx, preempted)
    assert change.action is Action.REPLACE, change.reason
    assert change.reason.startswith(
        "disrupted, not failed: WORKER 0 preempted on node n2 (PreemptionByScheduler"
    ), change.reason
    scheduled = gone_pod_event(objects, "worker", reason="Scheduled", message="assigned")
    assert only_change(mx, scheduled).state is State.FAILED  # says nothing of a disruption


# The kubelet's words when a pod it evicts used more than it requested (its eviction
# message, on the pod's DisruptionTarget condition and status, and on its Event).
OVERUSE = (
    "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. "
    "Container mxnet was using 3Gi, request is 1Gi, has larger consumption of memory. "
)


def own_eviction(base: dict[str, Any]) -> dict[str, Any]:
    evicted = disrupted(base, {**KUBELET_EVICTION, "message": OVERUSE})
    evicted["status"].update(reason="Evicted", message=OVERUSE)
    return evicted


def test_a_kubelet_eviction_for_the_pods_own_use_is_no_disruption() -> None:
    assert pod_disruption(own_eviction(failed_pod({}))) is None
    assert pod_disruption(disrupted(failed_pod({}), KUBELET_EVICTION)) is not None
    storage = 'Container mxnet exceeded its local ephemeral storage limit "1Gi". '
    assert pod_disruption(disrupted(failed_pod({}), {**KUBELET_EVICTION, "message": storage})) is (
        None
    )


@pytest.mark.parametrize("restart", [NEVER, ON_FAILURE, EXIT_CODE], ids=str)
def test_a_replica_evicted_for_its_own_use_fails_under_any_restart_policy(
    restart: model.RestartPolicy,
) -> None:
    evicted = own_eviction(failed_pod(terminated(143, reason="Error")))
    # a local job's batch Job ignores it (not counted) and makes a new pod
    ignored = [evicted, pod(RUNNING, name="new", started="2026-01-01T01:00:00Z")]
    assert replica_state(batch_job(restart=restart), ignored) is ReplicaState.FAILED
    failed = batch_job(restart=restart, failed=1, conditions=[FAIL_JOB])
    assert replica_state(failed, [evicted]) is ReplicaState.FAILED


def test_a_dist_job_evicted_for_its_own_use_fails_and_says_why() -> None:
    mx = job("d", restart="Never")
    evicted = own_eviction(failed_pod(terminated(137, reason="Error"), name="w1"))
    objects = live_with(mx, "worker", 1, [evicted], failed=1, conditions=[FAIL_JOB])
    change = only_change(mx, objects)
    assert (change.state, change.action) == (State.FAILED, Action.STOP), change.reason
    assert change.failure is not None and change.failure.replica == "WORKER 1"
    assert "Container mxnet was using 3Gi, request is 1Gi" in change.failure.message
    assert "Evicted" in change.failure.reason


def test_a_gone_pod_evicted_for_its_own_use_is_known_by_the_kubelets_event() -> None:
    """The eviction Event's annotations (`offending_containers_usage`) name the usage
    above the request; without them (or empty: none used more than it asked) the
    eviction is the node's doing, a disruption."""
    mx = job("d", restart="Never")
    objects = live_with(mx, "server", 0, [], failed=1, conditions=[FAIL_JOB])
    evidence = {
        "offending_containers": "mxnet",
        "offending_containers_usage": "3Gi",
        "starved_resource": "memory",
    }
    said = {"reason": "Evicted", "message": "The node was low on resource: memory. "}
    own = gone_pod_event(objects, "server", **said, metadata={"annotations": evidence})
    change = only_change(mx, own)
    assert change.state is State.FAILED, change.reason
    assert change.failure is not None and "3Gi" in change.failure.message
    none = {**evidence, "offending_containers": "", "offending_containers_usage": ""}
    node = gone_pod_event(objects, "server", **said, metadata={"annotations": none})
    change = only_change(mx, node)
    assert change.action is Action.REPLACE, change.reason
    assert "evicted by the kubelet of node" in change.reason


# -- JobSet: the JobSet controller restarts a disrupted gang whole, uncounted ------------

JOBSET_RULE = {
    "name": "disruption",
    "action": "RestartJobSetAndIgnoreMaxRestarts",
    "onJobFailureReasons": ["PodFailurePolicy"],
    "onJobFailureMessagePatterns": ["has condition DisruptionTarget matching FailJob rule"],
}


@pytest.mark.parametrize("restart", ["Never", "OnFailure", "ExitCode"])
def test_a_jobset_restarts_whole_on_a_disruption_without_counting_it(restart: str) -> None:
    from mxgitops.runtimes.jobset.render import render_jobset
    from tests.helpers.jobset import job_of
    from tests.helpers.sync import mxjob

    doc = mxjob("a", restart=restart, runPolicy={"backoffLimit": 0})
    (jobset,) = render_jobset(job_of(doc), CTX)
    policy = jobset["spec"]["failurePolicy"]
    first = policy["rules"][0]
    # before any rule a disruption would match; none without a pod failure policy
    assert (first == JOBSET_RULE) is (restart != "OnFailure")
    assert policy["maxRestarts"] == 0
    for replicated in jobset["spec"]["replicatedJobs"]:
        rules = (replicated["template"]["spec"].get("podFailurePolicy") or {}).get("rules")
        if restart == "OnFailure":
            assert rules is None  # Kubernetes allows none with restartPolicy OnFailure
        else:
            assert rules[0] == {
                "action": "FailJob",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
            }
