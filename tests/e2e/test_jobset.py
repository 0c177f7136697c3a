"""End to end: the JobSet runtime on the real control plane, with the real JobSet controller
(sigs.k8s.io/jobset v0.11.0) and Kueue controller manager (sigs.k8s.io/kueue v0.17.0),
their webhooks served on loopback with the test CA (``tests/ecosystem``). Pods are moved
by the fake kubelet; kube-controller-manager's job controller makes the child Jobs' pods.

The API double serves no JobSet (DIFFERENCES.md): these tests run on the real thing only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.commands.sync import SyncOutcome
from mxgitops.manifests import loading as manifests
from mxgitops.runtimes import registry as runtimes
from mxgitops.runtimes.shared.podtemplate import RenderContext
from tests.controlplane.harness import wait_for
from tests.ecosystem.fixtures import KUEUE_GROUP, Ecosystem
from tests.helpers import corpus
from tests.helpers.jobset import (
    JOBSETS,
    condition,
    gpu_job,
    kueue_setup,
    only_jobset,
    pod_of,
    step,
    until,
)
from tests.helpers.sync import (
    EXAMPLE_REPO,
    INSTANCE,
    NO_OP,
    NS,
    Syncer,
    mxjob,
    recorded,
    remove,
    repo,
    requests_made,
    summary_of,
    write,
)

__all__ = ["repo"]  # fixtures from tests/helpers, used here


@pytest.fixture
def run(ecosystem: Ecosystem, repo: Path) -> Syncer:
    return Syncer(ecosystem, repo)  # type: ignore[arg-type]  # the harness duck-types


def on_jobset(run: Syncer, **overrides: Any) -> SyncOutcome:
    return run(default_runtime="jobset", **overrides)


def differences(rendered: Any, stored: Any, path: str = "") -> list[str]:
    """Where the stored object differs from what was rendered (the server's additions
    to metadata and the status aside)."""
    if isinstance(rendered, dict) and isinstance(stored, dict):
        return [
            d
            for key in sorted(set(rendered) | set(stored))
            for d in differences(rendered.get(key), stored.get(key), f"{path}.{key}")
        ]
    if isinstance(rendered, list) and isinstance(stored, list) and len(rendered) == len(stored):
        return [
            d
            for index, (a, b) in enumerate(zip(rendered, stored, strict=True))
            for d in differences(a, b, f"{path}[{index}]")
        ]
    if isinstance(rendered, int | float) and isinstance(stored, str) and ".resources." in path:
        # A resource quantity comes back in its canonical form, a string ("8"), as every
        # pod template does: `kubectl diff` compares the server's forms on both sides.
        return [] if str(rendered) == stored else [f"{path}: {rendered} -> {stored}"]
    return [] if rendered == stored else [f"{path}: {json.dumps(rendered)} -> {json.dumps(stored)}"]


# -- rendering, judged by the real webhooks ---------------------------------------------------


def test_a_jobset_is_stored_exactly_as_rendered(ecosystem: Ecosystem, run: Syncer) -> None:
    """Every field JobSet's webhook and CRD default is written: nothing is added."""
    write(run.repo, mxjob("a", workers=2, restart="ExitCode", runPolicy={"backoffLimit": 2}))
    outcome = on_jobset(run)
    assert outcome.ok, outcome.summary
    assert summary_of(outcome, "a").action == "create"
    stored = only_jobset(ecosystem, "a")
    (job,) = manifests.load([run.repo], default_namespace=NS, default_runtime="jobset").jobs
    (rendered,) = runtimes.render(job, RenderContext(INSTANCE))
    assert differences(rendered["spec"], stored["spec"]) == []
    assert stored["metadata"]["labels"] == rendered["metadata"]["labels"]


@pytest.mark.parametrize(
    "root", [*corpus.root_params(), pytest.param(EXAMPLE_REPO, id="jobs-repo-example")]
)
def test_every_example_on_jobset_is_admitted_and_stored_as_rendered(
    ecosystem: Ecosystem, root: Path, tmp_path: Path
) -> None:
    loaded = manifests.load([root], default_namespace=NS, default_runtime="jobset")
    jobs = [j for j in loaded.jobs if j.runtime == "jobset"]
    assert jobs, "no dist example"
    for job in jobs:
        ecosystem.real.ensure_namespace(job.namespace)
        (rendered,) = runtimes.render(job, RenderContext(INSTANCE))
        stored = ecosystem.create(JOBSETS, "jobsets", rendered, job.namespace)
        assert differences(rendered["spec"], stored["spec"]) == [], job.source_path


# -- success and failure: the Kubeflow semantics, the batch runtime's -------------------------


def test_the_scheduler_succeeding_succeeds_the_job(ecosystem: Ecosystem, run: Syncer) -> None:
    write(run.repo, mxjob("a", servers=1, workers=2))
    assert on_jobset(run).ok
    name = only_jobset(ecosystem, "a")["metadata"]["name"]
    scheduler = pod_of(ecosystem, name, "scheduler")
    # servers and workers depend on the scheduler being Ready: none of them exists yet
    assert [p["metadata"]["labels"]["job_type"] for p in ecosystem.pods(name, NS)] == ["SCHEDULER"]
    step(ecosystem, scheduler, phase="Running")
    for role, index in (("server", 0), ("worker", 0), ("worker", 1)):
        step(ecosystem, pod_of(ecosystem, name, role, index), phase="Running")
    outcome = on_jobset(run)
    job = summary_of(outcome, "a")
    assert (job.action, job.state) == ("unchanged", "Running")
    assert {r.type: r.state for r in job.replicas} == {
        "SCHEDULER": "Running",
        "SERVER": "Running",
        "WORKER": "Running",
    }
    step(ecosystem, scheduler, phase="Succeeded")
    until(ecosystem, "a", "Completed", lambda js: condition(js, "Completed") is not None)
    outcome = on_jobset(run)
    assert summary_of(outcome, "a").state == "Succeeded"
    assert summary_of(on_jobset(run), "a").action == "unchanged"  # recorded: not run again


def test_a_failed_never_replica_fails_the_job_at_once_with_its_reason(
    ecosystem: Ecosystem, run: Syncer
) -> None:
    write(run.repo, mxjob("a", workers=2, restart="Never", runPolicy={"backoffLimit": 3}))
    assert on_jobset(run).ok
    name = only_jobset(ecosystem, "a")["metadata"]["name"]
    step(ecosystem, pod_of(ecosystem, name, "scheduler"), phase="Running")
    worker = pod_of(ecosystem, name, "worker", 1)
    step(ecosystem, worker, phase="Failed", exit_code=3, message="loss is NaN")
    until(ecosystem, "a", "Failed", lambda js: condition(js, "Failed") is not None)
    assert only_jobset(ecosystem, "a")["status"].get("restarts", 0) == 0  # not restarted
    job = summary_of(on_jobset(run), "a")
    assert job.state == "Failed"
    assert job.failure is not None
    assert (job.failure["replica"], job.failure["exit_code"]) == ("WORKER 1", 3)
    assert job.failure["message"] == "loss is NaN"
    assert "Error" in job.failure["reason"] and "FailurePolicy" in job.failure["reason"]


def test_exit_code_restarts_the_gang_on_a_signal_and_fails_at_once_on_a_permanent_code(
    ecosystem: Ecosystem, run: Syncer
) -> None:
    write(run.repo, mxjob("a", workers=1, restart="ExitCode", runPolicy={"backoffLimit": 1}))
    assert on_jobset(run).ok
    name = only_jobset(ecosystem, "a")["metadata"]["name"]
    step(ecosystem, pod_of(ecosystem, name, "scheduler"), phase="Running")
    first = pod_of(ecosystem, name, "worker")
    step(ecosystem, first, phase="Failed", exit_code=137, reason="Error", message="killed")
    until(ecosystem, "a", "restarted", lambda js: js.get("status", {}).get("restarts") == 1)
    assert condition(only_jobset(ecosystem, "a"), "Failed") is None
    assert summary_of(on_jobset(run), "a").state in ("Pending", "Running")
    step(ecosystem, pod_of(ecosystem, name, "scheduler"), phase="Running")
    again = pod_of(ecosystem, name, "worker")
    assert again["metadata"]["uid"] != first["metadata"]["uid"]  # the whole gang anew
    step(ecosystem, again, phase="Failed", exit_code=2, message="bad flag")
    until(ecosystem, "a", "Failed", lambda js: condition(js, "Failed") is not None)
    job = summary_of(on_jobset(run), "a")
    assert job.state == "Failed" and job.failure is not None
    assert (job.failure["replica"], job.failure["exit_code"]) == ("WORKER 0", 2)


def test_exit_code_fails_at_once_when_a_sidecar_fails_the_pod_while_mxnet_exited_0(
    ecosystem: Ecosystem, run: Syncer
) -> None:
    """As Kubeflow's operator, which read only `mxnet`'s exit code (0: not retryable),
    and as the batch runtime: not a gang restart, though no rule can name exit code 0."""
    doc = mxjob("a", workers=1, restart="ExitCode", runPolicy={"backoffLimit": 1})
    worker = doc["spec"]["mxReplicaSpecs"]["Worker"]["template"]["spec"]
    worker["containers"].append({"name": "monitor", "image": "busybox"})
    write(run.repo, doc)
    assert on_jobset(run).ok
    name = only_jobset(ecosystem, "a")["metadata"]["name"]
    step(ecosystem, pod_of(ecosystem, name, "scheduler"), phase="Running")
    failed = pod_of(ecosystem, name, "worker")
    step(ecosystem, failed, phase="Failed", container="monitor", exit_code=1, reason="Error")
    until(
        ecosystem,
        "a",
        "failed or restarted",
        lambda js: condition(js, "Failed") is not None or js.get("status", {}).get("restarts"),
    )
    assert only_jobset(ecosystem, "a")["status"].get("restarts", 0) == 0  # not restarted
    job = summary_of(on_jobset(run), "a")
    assert job.state == "Failed" and job.failure is not None, job
    failure = job.failure
    assert (failure["replica"], failure["container"], failure["exit_code"]) == (
        "WORKER 0",
        "monitor",
        1,
    )


def test_a_backoff_limit_is_a_budget_for_the_whole_job(ecosystem: Ecosystem, run: Syncer) -> None:
    write(run.repo, mxjob("a", workers=2, restart="ExitCode", runPolicy={"backoffLimit": 1}))
    assert on_jobset(run).ok
    name = only_jobset(ecosystem, "a")["metadata"]["name"]
    for index in (0, 1):  # one signal each, of two replicas: two restarts, a budget of one
        step(ecosystem, pod_of(ecosystem, name, "scheduler"), phase="Running")
        step(ecosystem, pod_of(ecosystem, name, "worker", index), phase="Failed", exit_code=143)
        until(
            ecosystem,
            "a",
            f"after failure {index + 1}",
            lambda js, i=index: (
                js.get("status", {}).get("restarts") == i + 1 or condition(js, "Failed") is not None
            ),
        )
    until(ecosystem, "a", "Failed", lambda js: condition(js, "Failed") is not None)
    assert summary_of(on_jobset(run), "a").state == "Failed"


# -- Kueue: queued, admitted whole, preempted -------------------------------------------------


def test_a_second_job_waits_queued_without_pods_and_runs_when_the_first_finishes(
    ecosystem: Ecosystem, run: Syncer
) -> None:
    kueue_setup(ecosystem, gpus=8)
    write(run.repo, gpu_job("first"))
    assert run().ok
    first = only_jobset(ecosystem, "first")["metadata"]["name"]
    until(ecosystem, "first", "admitted", lambda js: js["spec"].get("suspend") is False)
    write(run.repo, gpu_job("first"), gpu_job("second"))
    assert run().ok
    second = only_jobset(ecosystem, "second")["metadata"]["name"]
    wait_for(
        "Kueue to judge the second",
        lambda: (
            any(
                w["metadata"]["ownerReferences"][0]["name"] == second
                and any(
                    c["type"] == "QuotaReserved" for c in w.get("status", {}).get("conditions", [])
                )
                for w in ecosystem.workloads(NS)
            )
            or None
        ),
    )
    job = summary_of(run(), "second")
    assert job.state == "Queued"
    assert "insufficient unused quota for nvidia.com/gpu" in job.state_reason, job.state_reason
    assert ecosystem.pods(second, NS) == []
    assert only_jobset(ecosystem, "second")["spec"]["suspend"] is True
    step(ecosystem, pod_of(ecosystem, first, "scheduler"), phase="Running")
    assert ecosystem.pods(second, NS) == []  # at no point
    step(ecosystem, pod_of(ecosystem, first, "scheduler"), phase="Succeeded")
    until(ecosystem, "first", "Completed", lambda js: condition(js, "Completed") is not None)
    until(ecosystem, "second", "admitted", lambda js: js["spec"].get("suspend") is False)
    pod_of(ecosystem, second, "scheduler")
    outcome = run()
    assert summary_of(outcome, "first").state == "Succeeded"
    assert summary_of(outcome, "second").state in ("Pending", "Running")
    assert summary_of(outcome, "second").action == "unchanged"  # Kueue's suspend is Kueue's


def test_a_higher_priority_job_preempts_the_whole_lower_gang(
    ecosystem: Ecosystem, run: Syncer
) -> None:
    kueue_setup(ecosystem, gpus=8, preemption=True, workload_priorities=True)
    write(run.repo, gpu_job("low"))
    assert run().ok
    low = only_jobset(ecosystem, "low")["metadata"]["name"]
    until(ecosystem, "low", "admitted", lambda js: js["spec"].get("suspend") is False)
    step(ecosystem, pod_of(ecosystem, low, "scheduler"), phase="Running")
    for index in (0, 1):
        step(ecosystem, pod_of(ecosystem, low, "worker", index), phase="Running")
    write(run.repo, gpu_job("low"), gpu_job("high", priority="high"))
    assert run().ok
    until(ecosystem, "low", "evicted", lambda js: js["spec"].get("suspend") is True)
    wait_for(
        "the whole lower gang to stop",
        lambda: (
            not [p for p in ecosystem.pods(low, NS) if not p["metadata"].get("deletionTimestamp")]
            or None
        ),
    )
    # Kueue reserves the quota first and unsuspends the JobSet after: read once it has.
    until(ecosystem, "high", "admitted", lambda js: js["spec"].get("suspend") is False)
    outcome = run()
    job = summary_of(outcome, "low")
    assert job.state == "Preempted", (job.state, job.state_reason)
    assert job.state_reason
    assert summary_of(outcome, "high").state in ("Pending", "Running")
    high_jobset = only_jobset(ecosystem, "high")
    # priorityClass names a WorkloadPriorityClass: given to Kueue by its label
    assert high_jobset["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high"
    high = high_jobset["metadata"]["name"]
    step(ecosystem, pod_of(ecosystem, high, "scheduler"), phase="Running")
    step(ecosystem, pod_of(ecosystem, high, "scheduler"), phase="Succeeded")
    until(ecosystem, "low", "readmitted", lambda js: js["spec"].get("suspend") is False)
    pod_of(ecosystem, low, "scheduler")  # it runs again: not a re-run of a finished job
    assert summary_of(run(), "low").state in ("Pending", "Running")


def test_a_gang_preempted_after_a_worker_finished_runs_again_whole(
    ecosystem: Ecosystem, run: Syncer
) -> None:
    """Resumed as it is, the worker Job of a gang preempted after worker 0 finished runs
    only worker 1, which waits for worker 0 for ever (an Indexed Job keeps its completed
    indexes): the JobSet is made anew, queued again, and readmitted runs every worker."""
    kueue_setup(ecosystem, gpus=8, preemption=True, workload_priorities=True)
    write(run.repo, gpu_job("low"))
    assert run().ok
    first = only_jobset(ecosystem, "low")["metadata"]
    low = first["name"]
    until(ecosystem, "low", "admitted", lambda js: js["spec"].get("suspend") is False)
    step(ecosystem, pod_of(ecosystem, low, "scheduler"), phase="Running")
    step(ecosystem, pod_of(ecosystem, low, "worker", 1), phase="Running")
    step(ecosystem, pod_of(ecosystem, low, "worker", 0), phase="Running")
    step(ecosystem, pod_of(ecosystem, low, "worker", 0), phase="Succeeded")
    write(run.repo, gpu_job("low"), gpu_job("high", priority="high"))
    assert run().ok
    until(ecosystem, "low", "preempted", lambda js: js["spec"].get("suspend") is True)
    job = summary_of(run(), "low")
    assert job.action == "replace", (job.action, job.reason)
    assert "WORKER 0 finished before Kueue stopped the gang" in job.reason, job.reason
    assert "not counted against backoffLimit" in job.reason
    until(ecosystem, "low", "made anew", lambda js: js["metadata"]["uid"] != first["uid"])
    anew = only_jobset(ecosystem, "low")
    assert anew["metadata"]["name"] == low and anew["spec"]["suspend"] is True  # queued again
    high = only_jobset(ecosystem, "high")["metadata"]["name"]
    step(ecosystem, pod_of(ecosystem, high, "scheduler"), phase="Running")
    step(ecosystem, pod_of(ecosystem, high, "scheduler"), phase="Succeeded")
    until(ecosystem, "low", "readmitted", lambda js: js["spec"].get("suspend") is False)
    step(ecosystem, pod_of(ecosystem, low, "scheduler"), phase="Running")  # dependsOn it
    for index in (0, 1):  # every worker runs: worker 0 too
        pod_of(ecosystem, low, "worker", index)
    job = summary_of(run(), "low")
    assert (job.action, job.state) in (("unchanged", "Pending"), ("unchanged", "Running"))


# -- changes: replace, prune, on-change: wait, hand edits ------------------------------------


def test_a_changed_spec_replaces_the_jobset(ecosystem: Ecosystem, run: Syncer) -> None:
    write(run.repo, mxjob("a", workers=2))
    assert on_jobset(run).ok
    before = only_jobset(ecosystem, "a")["metadata"]["name"]
    write(run.repo, mxjob("a", workers=3))
    outcome = on_jobset(run)
    assert summary_of(outcome, "a").action == "replace"
    wait_for(
        "the old JobSet to go",
        lambda: [j for j in ecosystem.jobsets(NS) if j["metadata"]["name"] == before] == [] or None,
    )
    after = only_jobset(ecosystem, "a")
    assert after["metadata"]["name"] != before
    assert len(after["spec"]["replicatedJobs"]) == 3
    assert summary_of(on_jobset(run), "a").action == "unchanged"


def test_moving_a_job_between_runtimes_is_a_replace(ecosystem: Ecosystem, run: Syncer) -> None:
    write(run.repo, mxjob("a", workers=2))
    assert run().ok  # batch
    assert ecosystem.real.objects("jobs", NS)
    outcome = on_jobset(run)
    assert summary_of(outcome, "a").action == "replace"
    only_jobset(ecosystem, "a")
    assert summary_of(on_jobset(run), "a").action == "unchanged"


def test_a_job_moved_off_jobset_is_found_and_replaced_then_jobsets_are_not_listed(
    ecosystem: Ecosystem, run: Syncer
) -> None:
    """Issue 20: the ledger records `jobset` before the first JobSet is created; a job
    moved to batch is a replace (its JobSet is listed, found and deleted); once no
    JobSet is left, one sync records batch alone, and a no-op is the 4 LISTs."""
    real = ecosystem.real
    write(run.repo, mxjob("a", workers=2))
    real.clear_log()
    assert on_jobset(run).ok
    log = [(e["verb"], e["resource"], e["path"].rsplit("/", 1)[-1]) for e in real.request_log]
    recorded_at = log.index(("create", "configmaps", "configmaps"))  # the first ledger shard
    assert log.index(("create", "jobsets", "jobsets")) > recorded_at
    assert recorded(real) == "batch,jobset"
    jobset = only_jobset(ecosystem, "a")["metadata"]["name"]
    real.clear_log()
    outcome = run()  # the default runtime, batch
    assert outcome.ok and summary_of(outcome, "a").action == "replace"
    deleted = [e["path"] for e in real.request_log if e["verb"] == "delete"]
    assert deleted == [f"{JOBSETS}/namespaces/{NS}/jobsets/{jobset}"]
    assert recorded(real) == "batch,jobset"  # it was found: not yet
    wait_for("the JobSet to go", lambda: not ecosystem.jobsets(NS) or None)
    real.clear_log()
    assert run().ok
    assert [(e["verb"], e["resource"]) for e in real.request_log].count(("list", "jobsets")) == 1
    assert recorded(real) == "batch"
    real.clear_log()
    assert summary_of(run(), "a").action == "unchanged"
    assert requests_made(real.request_log) == NO_OP


def test_a_removed_manifest_prunes_the_jobset_and_on_change_wait_holds(
    ecosystem: Ecosystem, run: Syncer
) -> None:
    waits = {"mxgitops.io/on-change": "wait"}
    write(run.repo, mxjob("a"), mxjob("b", annotations=waits), mxjob("c"))
    assert on_jobset(run).ok
    remove(run.repo, "a")
    write(run.repo, mxjob("b", workers=3, annotations=waits), mxjob("c"))
    outcome = on_jobset(run)
    assert summary_of(outcome, "a").action == "delete"
    assert (summary_of(outcome, "b").action, summary_of(outcome, "b").state) == ("hold", "Waiting")
    wait_for(
        "a's JobSet to go",
        lambda: (
            not [
                j
                for j in ecosystem.jobsets(NS)
                if j["metadata"]["labels"]["mxgitops.io/job"] == "a"
            ]
            or None
        ),
    )
    b = only_jobset(ecosystem, "b")["metadata"]["name"]
    step(ecosystem, pod_of(ecosystem, b, "scheduler"), phase="Running")
    step(ecosystem, pod_of(ecosystem, b, "scheduler"), phase="Succeeded")
    until(ecosystem, "b", "Completed", lambda js: condition(js, "Completed") is not None)
    assert summary_of(on_jobset(run), "b").action == "replace"  # it finished: now


def test_a_hand_edit_is_repaired_and_kueues_own_writes_are_not(
    ecosystem: Ecosystem, run: Syncer
) -> None:
    write(run.repo, mxjob("a"))
    assert on_jobset(run).ok
    name = only_jobset(ecosystem, "a")["metadata"]["name"]
    ecosystem.rest.patch(f"{JOBSETS}/namespaces/{NS}/jobsets/{name}", {"spec": {"suspend": True}})
    outcome = on_jobset(run)
    assert summary_of(outcome, "a").action == "repair", summary_of(outcome, "a").reason
    assert only_jobset(ecosystem, "a")["spec"]["suspend"] is False
    ecosystem.rest.delete(f"{JOBSETS}/namespaces/{NS}/jobsets/{name}")
    wait_for("the JobSet to go", lambda: not ecosystem.jobsets(NS) or None)
    # deleted by hand, unfinished: made again (as the batch runtime's batch Jobs are)
    assert summary_of(on_jobset(run), "a").action == "create"
    only_jobset(ecosystem, "a")
    # Queued: Kueue unsuspends it at admission, and that is not a hand edit.
    kueue_setup(ecosystem, gpus=8)
    write(run.repo, mxjob("a"), gpu_job("q"))
    assert on_jobset(run).ok
    until(ecosystem, "q", "admitted", lambda js: js["spec"].get("suspend") is False)
    outcome = on_jobset(run)
    assert summary_of(outcome, "q").action == "unchanged", summary_of(outcome, "q").reason


def test_run_policy_suspend_stops_a_queued_job_the_way_kueue_expects(
    ecosystem: Ecosystem, run: Syncer
) -> None:
    kueue_setup(ecosystem, gpus=8)
    write(run.repo, gpu_job("a"))
    assert run().ok
    name = only_jobset(ecosystem, "a")["metadata"]["name"]
    until(ecosystem, "a", "admitted", lambda js: js["spec"].get("suspend") is False)
    pod_of(ecosystem, name, "scheduler")
    stopped = gpu_job("a")
    stopped["spec"]["runPolicy"]["suspend"] = True
    write(run.repo, stopped)
    outcome = run()
    job = summary_of(outcome, "a")
    assert job.action == "update" and "spec.active true -> false" in job.reason, job.reason
    (workload,) = ecosystem.workloads(NS)
    assert workload["spec"]["active"] is False
    until(ecosystem, "a", "suspended by Kueue", lambda js: js["spec"].get("suspend") is True)
    wait_for(
        "its pods to go",
        lambda: (
            not [p for p in ecosystem.pods(name, NS) if not p["metadata"].get("deletionTimestamp")]
            or None
        ),
    )
    outcome = run()
    assert (summary_of(outcome, "a").action, summary_of(outcome, "a").state) == (
        "unchanged",
        "Suspended",
    )
    write(run.repo, gpu_job("a"))
    assert summary_of(run(), "a").action == "update"
    until(ecosystem, "a", "readmitted", lambda js: js["spec"].get("suspend") is False)
    pod_of(ecosystem, name, "scheduler")
    assert summary_of(run(), "a").action == "unchanged"


def test_a_queued_dist_job_suspended_after_its_workers_finished_resumes_whole(
    ecosystem: Ecosystem, run: Syncer
) -> None:
    """JobSet resumes only its child Jobs not complete: without its JobSet made anew, the
    resumed scheduler would wait for the finished workers for ever (the batch runtime's
    case: tests/planning/test_suspend_whole.py)."""
    kueue_setup(ecosystem, gpus=8)
    write(run.repo, gpu_job("a"))
    assert run().ok
    name = only_jobset(ecosystem, "a")["metadata"]["name"]
    until(ecosystem, "a", "admitted", lambda js: js["spec"].get("suspend") is False)
    step(ecosystem, pod_of(ecosystem, name, "scheduler"), phase="Running")
    for index in (0, 1):
        step(ecosystem, pod_of(ecosystem, name, "worker", index), phase="Succeeded")
    stopped = gpu_job("a")
    stopped["spec"]["runPolicy"]["suspend"] = True
    write(run.repo, stopped)
    assert summary_of(run(), "a").action == "update"  # its Workload deactivated
    until(ecosystem, "a", "suspended by Kueue", lambda js: js["spec"].get("suspend") is True)
    old = only_jobset(ecosystem, "a")["metadata"]["uid"]
    job = summary_of(run(), "a")
    assert job.action == "repair" and "resumed whole" in job.reason, job.reason
    if only_jobset(ecosystem, "a")["metadata"]["uid"] == old:  # gone after the sync's wait
        run()
    assert only_jobset(ecosystem, "a")["metadata"]["uid"] != old
    assert summary_of(run(), "a").action == "unchanged"
    write(run.repo, gpu_job("a"))
    assert summary_of(run(), "a").action == "update"
    until(ecosystem, "a", "readmitted", lambda js: js["spec"].get("suspend") is False)
    step(ecosystem, pod_of(ecosystem, name, "scheduler"), phase="Running")
    assert all(pod_of(ecosystem, name, "worker", index) for index in (0, 1))  # both again


def test_a_queued_job_created_suspended_is_never_admitted_until_resumed(
    ecosystem: Ecosystem, run: Syncer
) -> None:
    """Free quota, and a `default` LocalQueue in its namespace too (Kueue gives a JobSet
    without a queue name that one): a job created suspended has no Workload and no pod,
    its JobSet's spec never moves (Kueue unsuspends a JobSet to admit it), until resumed;
    then it is admitted and runs, and a later suspend and resume go through its Workload."""
    kueue_setup(ecosystem, gpus=8)
    ecosystem.local_queue("default", NS, "gpus")
    suspended = gpu_job("a")
    suspended["spec"]["runPolicy"]["suspend"] = True
    write(run.repo, suspended)
    outcome = run()
    assert summary_of(outcome, "a").action == "create", summary_of(outcome, "a").reason
    held = only_jobset(ecosystem, "a")
    name = held["metadata"]["name"]
    assert held["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team"
    # Kueue has reconciled it, and waits for the prebuilt Workload it names
    wait_for(
        "Kueue to hold the suspended job",
        lambda: ecosystem.kueue_said("prebuilt workload not found", name),
    )
    assert ecosystem.workloads(NS) == []
    after = only_jobset(ecosystem, "a")
    assert after["spec"]["suspend"] is True
    assert after["metadata"]["generation"] == held["metadata"]["generation"] == 1  # never moved
    assert ecosystem.pods(name, NS) == []
    job = summary_of(run(), "a")
    assert (job.action, job.state) == ("unchanged", "Suspended"), job.reason
    # resumed: queued, admitted, run
    write(run.repo, gpu_job("a"))
    job = summary_of(run(), "a")
    assert job.action == "update" and "prebuilt-workload-name" in job.reason, job.reason
    until(ecosystem, "a", "admitted", lambda js: js["spec"].get("suspend") is False)
    assert only_jobset(ecosystem, "a")["metadata"]["name"] == name  # resumed, not replaced
    step(ecosystem, pod_of(ecosystem, name, "scheduler"), phase="Running")
    pod_of(ecosystem, name, "worker", 1)
    # suspended again: its Workload deactivated, the gang evicted
    write(run.repo, suspended)
    job = summary_of(run(), "a")
    assert job.action == "update" and "spec.active true -> false" in job.reason, job.reason
    until(ecosystem, "a", "suspended by Kueue", lambda js: js["spec"].get("suspend") is True)
    wait_for(
        "its pods to go",
        lambda: (
            not [p for p in ecosystem.pods(name, NS) if not p["metadata"].get("deletionTimestamp")]
            or None
        ),
    )
    job = summary_of(run(), "a")
    assert (job.action, job.state) == ("unchanged", "Suspended"), job.reason
    # and resumed again: reactivated, readmitted
    write(run.repo, gpu_job("a"))
    job = summary_of(run(), "a")
    assert job.action == "update" and "spec.active false -> true" in job.reason, job.reason
    until(ecosystem, "a", "readmitted", lambda js: js["spec"].get("suspend") is False)
    pod_of(ecosystem, name, "scheduler")
    assert summary_of(run(), "a").action == "unchanged"


def test_the_example_kueue_setup_is_accepted_by_kueue(ecosystem: Ecosystem) -> None:
    example = Path(__file__).resolve().parents[2] / "cronjob/components/jobset/kueue-example.yaml"
    plurals = {
        "ResourceFlavor": "resourceflavors",
        "ClusterQueue": "clusterqueues",
        "LocalQueue": "localqueues",
        "WorkloadPriorityClass": "workloadpriorityclasses",
    }
    for doc in yaml.safe_load_all(example.read_text()):
        namespace = doc["metadata"].get("namespace")
        if namespace:
            ecosystem.real.ensure_namespace(namespace)
        ecosystem.create(KUEUE_GROUP, plurals[doc["kind"]], doc, namespace)

    def active() -> bool:
        (queue,) = ecosystem.objects(KUEUE_GROUP, "clusterqueues")
        conditions = (queue.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)

    wait_for("the example ClusterQueue to be active", lambda: active() or None)


def test_render_output_is_accepted_by_kubectl_apply_dry_run_server(
    ecosystem: Ecosystem, tmp_path: Path
) -> None:
    """`mxgitops render | kubectl apply --dry-run=server -f -`, through the real webhooks."""
    import shutil
    import subprocess

    from click.testing import CliRunner

    from mxgitops.cli import main

    repo = write(tmp_path / "jobs", mxjob("a"), gpu_job("q"), mxjob("l", servers=0))
    for output in ("yaml", "json"):
        rendered = CliRunner().invoke(main, ["render", "-n", NS, "-o", output, str(repo)])
        assert rendered.exit_code == 0, rendered.output
        kubectl = shutil.which("kubectl")
        assert kubectl is not None
        applied = subprocess.run(
            [
                kubectl,
                "--kubeconfig",
                str(ecosystem.kubeconfig),
                "apply",
                "--dry-run=server",
                "-f",
                "-",
            ],
            input=rendered.stdout,
            capture_output=True,
            text=True,
        )
        assert applied.returncode == 0, applied.stderr
        assert "jobset.jobset.x-k8s.io/q-" in applied.stdout
        assert "job.batch/l-worker-" in applied.stdout
    assert ecosystem.jobsets() == []  # a dry run
