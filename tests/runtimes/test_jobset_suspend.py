"""`runPolicy.suspend` of a queued job, carried out through Kueue (issue 22): a job created
suspended is held out of its queue (its JobSet names a prebuilt Workload that is never
made, so Kueue makes none and admits nothing); resuming removes the hold; a job Kueue has
made a Workload for is stopped and resumed by that Workload's spec.active.

Pure: the plan against live objects as the real server stores them. What Kueue and the
JobSet controller make of them is judged in tests/e2e/test_jobset.py.
"""

from __future__ import annotations

import json
from typing import Any

from mxgitops.manifests.spec import from_manifest
from mxgitops.objects import LiveObjects, ObjectRef
from mxgitops.planning.changes import Action, Change, PlanOptions
from mxgitops.planning.ledger import Ledger
from mxgitops.planning.plan import plan
from mxgitops.runtimes.jobset.failure import COMPLETION_INDEX_LABEL, JOBSET_NAME_LABEL
from mxgitops.runtimes.jobset.inplace import compare
from mxgitops.runtimes.jobset.kinds import JOBSET, WORKLOAD
from mxgitops.runtimes.jobset.render import HOLD_LABEL, render_jobset
from mxgitops.runtimes.jobset.stopped import RESTART_ATTEMPT_LABEL
from mxgitops.runtimes.shared.inplace import IN_PLACE_ANNOTATION
from mxgitops.runtimes.shared.labels import JOB_TYPE_LABEL
from mxgitops.runtimes.shared.podtemplate import RenderContext
from mxgitops.runtimes.shared.state import State
from tests.helpers.sync import mxjob

CTX = RenderContext("prod")
UID = "u1"


def queued_job(*, suspend: bool) -> Any:
    policy: dict[str, Any] = {"schedulingPolicy": {"queue": "team"}}
    if suspend:
        policy["suspend"] = True
    return from_manifest(mxjob("a", runPolicy=policy), default_namespace="ml")


def stored(job: Any, **spec: Any) -> dict[str, Any]:
    """The job's JobSet as the server stores it (a uid, Kueue's spec.suspend)."""
    (jobset,) = render_jobset(job, CTX)
    found: dict[str, Any] = json.loads(json.dumps(jobset))
    found["metadata"]["uid"] = UID
    found["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    found["spec"].update(spec)
    return found


def workload(active: bool | None = None) -> dict[str, Any]:
    spec = {} if active is None else {"active": active}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "jobset-a-1a2b3",
            "namespace": "ml",
            "ownerReferences": [{"kind": "JobSet", "name": "a", "uid": UID}],
        },
        "spec": spec,
    }


def one_change(job: Any, jobset: dict[str, Any], *workloads: dict[str, Any]) -> Change:
    live = LiveObjects(kinds={JOBSET: (jobset,), WORKLOAD: workloads})
    (change,) = plan([job], live, Ledger(), PlanOptions(instance="prod")).changes
    return change


def test_a_queued_job_created_suspended_is_held_out_of_its_queue() -> None:
    held, running = queued_job(suspend=True), queued_job(suspend=False)
    (jobset,) = render_jobset(held, CTX)
    labels = jobset["metadata"]["labels"]
    name = jobset["metadata"]["name"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team"  # no default LocalQueue for it
    assert labels[HOLD_LABEL] == f"{name}-suspended"
    assert jobset["spec"]["suspend"] is True
    (plain,) = render_jobset(running, CTX)
    assert HOLD_LABEL not in plain["metadata"]["labels"]
    # the hold is no part of the spec: the same runtime, resumed in place
    assert held.spec_hash == running.spec_hash and plain["metadata"]["name"] == name


def test_a_held_job_reads_as_suspended_and_is_in_sync() -> None:
    job = queued_job(suspend=True)
    change = one_change(job, stored(job))
    assert (change.action, change.state) == ("unchanged", State.SUSPENDED)
    assert {r.state for r in change.replicas} == {"Suspended"}
    assert all("held out of its queue" in r.reason for r in change.replicas)


def test_resuming_a_held_job_removes_the_hold_and_leaves_suspend_to_kueue() -> None:
    job = queued_job(suspend=True)
    change = one_change(queued_job(suspend=False), stored(job))
    assert change.action == "update", change.reason
    (patch,) = change.patches
    assert patch.patch == {
        "metadata": {"annotations": {IN_PLACE_ANNOTATION: None}, "labels": {HOLD_LABEL: None}}
    }
    assert not patch.drift
    assert f"label {HOLD_LABEL} a-" in change.reason and "-suspended -> unset" in change.reason


def test_a_hold_removed_by_hand_before_kueue_made_a_workload_is_set_back() -> None:
    job = queued_job(suspend=True)
    unheld = stored(job)
    del unheld["metadata"]["labels"][HOLD_LABEL]
    change = one_change(job, unheld)
    assert change.action == "repair", change.reason
    (patch,) = change.patches
    assert patch.drift
    assert patch.patch["metadata"]["labels"] == {
        HOLD_LABEL: unheld["metadata"]["name"] + "-suspended"
    }
    # and a hold added by hand to a job that is to run is removed, as a repair too
    running = queued_job(suspend=False)
    added = stored(running)
    added["metadata"]["labels"][HOLD_LABEL] = "x"
    assert one_change(running, added).action == "repair"


def test_suspending_a_job_kueue_has_a_workload_for_deactivates_the_workload() -> None:
    running = queued_job(suspend=False)
    admitted = stored(running, suspend=False)
    change = one_change(queued_job(suspend=True), admitted, workload())
    assert change.action == "update", change.reason
    by_kind = {p.ref.kind: p for p in change.patches}
    assert by_kind[WORKLOAD].patch == {"spec": {"active": False}}
    assert "spec.active true -> false" in change.reason
    # admitted: the JobSet is not held (Kueue's webhook would refuse the label)
    assert by_kind[JOBSET].patch == {
        "metadata": {"annotations": {IN_PLACE_ANNOTATION: '{"suspend":true}'}}
    }


def test_a_workload_reactivated_by_hand_is_deactivated_again() -> None:
    job = queued_job(suspend=True)
    evicted = stored(job)
    del evicted["metadata"]["labels"][HOLD_LABEL]  # created before Kueue had a Workload
    (patch,) = compare(job, [evicted], [workload(active=True)])
    assert patch.ref.kind is WORKLOAD and patch.drift
    assert patch.patch == {"spec": {"active": False}}
    assert compare(job, [evicted], [workload(active=False)]) == []


def test_resuming_reactivates_only_a_workload_this_suspend_deactivated() -> None:
    job = queued_job(suspend=True)
    evicted = stored(job)
    del evicted["metadata"]["labels"][HOLD_LABEL]
    resumed = queued_job(suspend=False)
    patches = {p.ref.kind: p for p in compare(resumed, [evicted], [workload(active=False)])}
    assert patches[WORKLOAD].patch == {"spec": {"active": True}}
    assert not patches[WORKLOAD].drift
    # Kueue deactivated it itself (its maximum execution time): it stays so
    by_kueue = stored(resumed)
    assert compare(resumed, [by_kueue], [workload(active=False)]) == []


def test_a_held_job_with_a_workload_is_resumed_by_both() -> None:
    """A Workload Kueue made just before the hold (a suspend soon after a resume): it is
    deactivated while held, and reactivated with the hold's removal."""
    job = queued_job(suspend=True)
    held = stored(job)
    (patch,) = compare(job, [held], [workload(active=True)])
    assert patch.ref.kind is WORKLOAD and patch.patch == {"spec": {"active": False}}
    resumed = compare(queued_job(suspend=False), [held], [workload(active=False)])
    assert [p.ref.kind for p in resumed] == [JOBSET, WORKLOAD]
    assert resumed[0].patch["metadata"]["labels"] == {HOLD_LABEL: None}
    assert resumed[1].patch == {"spec": {"active": True}}


def test_suspending_an_admitted_job_whose_workload_is_not_read_waits() -> None:
    """Neither hold (refused while admitted) nor deactivate: nothing is recorded as done,
    so the next sync, which reads the Workload, does it."""
    running = queued_job(suspend=False)
    assert compare(queued_job(suspend=True), [stored(running, suspend=False)]) == []


# A pod's status once its container ended well, at 00:05.
FINISHED: dict[str, Any] = {
    "phase": "Succeeded",
    "containerStatuses": [
        {"name": "mxnet", "state": {"terminated": {"finishedAt": "2026-01-01T00:05:00Z"}}}
    ],
}


def finished_worker(job: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The job's JobSet suspended by Kueue after its worker 0 finished (its pod Succeeded,
    kept by its Job), and that pod."""
    jobset = stored(job, suspend=True)
    jobset["status"] = {"replicatedJobsStatus": [{"name": "worker", "active": 1}]}
    return jobset, pod_of_run(jobset, 0, "2026-01-01T00:00:01Z", **FINISHED)


def test_a_queued_dist_job_suspended_after_a_replica_finished_is_made_anew_held() -> None:
    """Kueue suspends a JobSet's child Jobs, and resumes them: a finished worker (its
    index complete) would not run again, and the ps-lite job would wait for it for ever.
    So its JobSet is made anew, held, as under Kubeflow's operator (every pod deleted on
    suspend, all made anew on resume: tests/planning/test_suspend_whole.py)."""
    job = queued_job(suspend=True)
    jobset, pod = finished_worker(job)
    live = LiveObjects(pods=(pod,), kinds={JOBSET: (jobset,), WORKLOAD: (workload(active=False),)})
    (change,) = plan([job], live, Ledger(), PlanOptions(instance="prod")).changes
    assert change.action is Action.REPAIR and "resumed whole" in change.reason, change.reason
    assert change.deletes == (ObjectRef.of(jobset),) and change.starts_after_deletes
    (made,) = change.creates
    assert made["metadata"]["name"] == jobset["metadata"]["name"]
    assert made["spec"]["suspend"] is True and HOLD_LABEL in made["metadata"]["labels"]
    assert change.state is not State.SUCCEEDED
    # the pods of the JobSet it replaces, still being collected, are not the new one's
    remade = {**made, "metadata": {**made["metadata"], "uid": "u2"}}
    remade["metadata"]["creationTimestamp"] = "2026-01-01T00:00:02Z"
    live = LiveObjects(pods=(pod,), kinds={JOBSET: (remade,)})
    (change,) = plan([job], live, Ledger(), PlanOptions(instance="prod")).changes
    assert change.action is Action.UNCHANGED, change.reason
    # a child Job complete says it as well
    done = {"replicatedJobsStatus": [{"name": "worker", "succeeded": 1}]}
    live = LiveObjects(kinds={JOBSET: ({**jobset, "status": done},), WORKLOAD: (workload(False),)})
    (change,) = plan([job], live, Ledger(), PlanOptions(instance="prod")).changes
    assert change.deletes == (ObjectRef.of(jobset),)


def test_nothing_is_made_anew_while_it_runs_or_before_kueue_stopped_it() -> None:
    running = queued_job(suspend=False)
    jobset, pod = finished_worker(running)
    jobset["spec"]["suspend"] = False
    live = LiveObjects(pods=(pod,), kinds={JOBSET: (jobset,), WORKLOAD: (workload(),)})
    (change,) = plan([running], live, Ledger(), PlanOptions(instance="prod")).changes
    assert not change.deletes and not change.creates
    stopping = queued_job(suspend=True)  # Kueue has not suspended it yet: its Workload first
    live = LiveObjects(pods=(pod,), kinds={JOBSET: (jobset,), WORKLOAD: (workload(),)})
    (change,) = plan([stopping], live, Ledger(), PlanOptions(instance="prod")).changes
    assert not change.deletes and WORKLOAD in [p.ref.kind for p in change.patches]


def pod_of_run(jobset: dict[str, Any], index: int, created: str, **status: Any) -> dict[str, Any]:
    """A worker pod of the JobSet's first run, made at `created`."""
    name = jobset["metadata"]["name"]
    labels = {JOBSET_NAME_LABEL: name, JOB_TYPE_LABEL: "WORKER", COMPLETION_INDEX_LABEL: str(index)}
    labels[RESTART_ATTEMPT_LABEL] = "0"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-worker-0-{index}-{created[-3:-1]}",
            "namespace": "ml",
            "labels": labels,
            "creationTimestamp": created,
        },
        "status": status or {"phase": "Running"},
    }


def test_a_gang_kueue_stopped_after_a_worker_finished_runs_again_whole() -> None:
    """Kueue preempted the gang (not its manifest): resumed, the worker Job would run
    worker 1 alone, which would wait for worker 0 for ever. The JobSet is made anew, under
    its name, queued again as Kueue requeues a preempted gang; nothing is counted."""
    job = queued_job(suspend=False)
    jobset, finished = finished_worker(job)
    change = one_change_with(job, jobset, finished)
    assert change.action is Action.REPLACE, change.reason
    assert "WORKER 0 finished before Kueue stopped the gang" in change.reason
    assert "not counted against backoffLimit" in change.reason
    assert change.deletes == (ObjectRef.of(jobset),) and change.starts_after_deletes
    (made,) = change.creates
    assert made["metadata"]["name"] == jobset["metadata"]["name"]
    assert HOLD_LABEL not in made["metadata"]["labels"]  # queued again, not held


def test_a_gang_kueue_readmitted_before_a_sync_saw_it_stopped_runs_again_whole() -> None:
    """Readmitted before any sync looked: worker 1's pod of the run was made after worker
    0 had finished, so the run was stopped and resumed in between."""
    job = queued_job(suspend=False)
    jobset, finished = finished_worker(job)
    jobset["spec"]["suspend"] = False
    resumed = pod_of_run(jobset, 1, "2026-01-01T00:07:00Z")
    change = one_change_with(job, jobset, finished, resumed)
    assert change.action is Action.REPLACE, change.reason
    assert "pods of the run were made after it" in change.reason


def test_a_worker_finishing_first_in_a_run_is_no_disruption() -> None:
    """The same pods in a run never stopped (worker 1 made with worker 0), one of an
    earlier restart of the gang, and a local job: nothing is made anew."""
    job = queued_job(suspend=False)
    jobset, finished = finished_worker(job)
    jobset["spec"]["suspend"] = False
    running = pod_of_run(jobset, 1, "2026-01-01T00:00:01Z")
    assert one_change_with(job, jobset, finished, running).action is Action.UNCHANGED
    jobset["spec"]["suspend"] = True
    jobset["status"]["restarts"] = 1  # the gang restarted since worker 0 finished
    change = one_change_with(job, jobset, finished)
    assert not change.deletes and not change.creates, change.reason
    local = from_manifest(
        mxjob("a", servers=0, runPolicy={"schedulingPolicy": {"queue": "team"}}),
        default_namespace="ml",
    )
    alone = stored(local, suspend=True)
    done = pod_of_run(alone, 0, "2026-01-01T00:00:01Z", **FINISHED)
    change = one_change_with(local, alone, done)
    assert not change.deletes and not change.creates, change.reason


def one_change_with(job: Any, jobset: dict[str, Any], *pods: dict[str, Any]) -> Change:
    live = LiveObjects(pods=pods, kinds={JOBSET: (jobset,), WORKLOAD: (workload(),)})
    (change,) = plan([job], live, Ledger(), PlanOptions(instance="prod")).changes
    return change
