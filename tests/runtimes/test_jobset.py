"""The JobSet runtime, unit by unit: rendering, names, which jobs use it, reading state back.

What the real JobSet controller and Kueue make of these objects is judged in
tests/e2e/test_jobset.py; here the pure functions are pinned down.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.manifests import loading as manifests
from mxgitops.model import SpecError
from mxgitops.objects import LiveObjects
from mxgitops.planning.changes import PlanOptions
from mxgitops.planning.ledger import Ledger
from mxgitops.planning.plan import plan
from mxgitops.runtimes import registry as runtimes
from mxgitops.runtimes.batch.render import render_job
from mxgitops.runtimes.jobset.inplace import compare
from mxgitops.runtimes.jobset.kinds import (
    JOBSET,
    MULTIKUEUE_CLUSTER,
    WORKLOAD,
    WORKLOAD_PRIORITY_CLASS,
)
from mxgitops.runtimes.jobset.live import LiveJobSet
from mxgitops.runtimes.jobset.render import render_jobset
from mxgitops.runtimes.shared.state import State
from tests.helpers import corpus
from tests.helpers.jobset import CTX, job_of, queued
from tests.helpers.sync import EXAMPLE_REPO, mxjob

# -- which jobs run on JobSet --------------------------------------------------------------


def test_a_queued_job_runs_on_jobset_whatever_the_default() -> None:
    job = job_of(queued(), "batch")
    assert (job.runtime, job.queue) == ("jobset", "team")


def test_the_operators_default_moves_dist_jobs_only() -> None:
    assert job_of(mxjob("d")).runtime == "jobset"
    assert job_of(mxjob("l", servers=0)).runtime == "batch"  # local: no JobSet
    assert job_of(mxjob("d"), "batch").runtime == "batch"


def test_kueues_label_wins_over_a_different_scheduling_policy_queue() -> None:
    doc = queued()
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "other"}
    job = job_of(doc)
    assert job.queue == "other"
    (warning,) = job.warnings
    assert warning.field_path == "spec.runPolicy.schedulingPolicy.queue"
    assert "is not used" in warning.message


@pytest.mark.parametrize(
    "root", [*corpus.root_params(), pytest.param(EXAMPLE_REPO, id="jobs-repo-example")]
)
def test_a_manifest_that_names_no_queue_renders_exactly_as_before(root: Path) -> None:
    """The batch runtime's objects and spec hash, untouched by the runtime seam."""
    loaded = manifests.load([root], default_namespace="ml")
    assert loaded.jobs
    for job in loaded.jobs:
        assert job.runtime == "batch" and not job.queue
        assert runtimes.render(job, CTX) == render_job(job, CTX)
        assert runtimes.refs(job) == [
            runtimes.refs(job)[i] for i in range(len(render_job(job, CTX)))
        ]
        # the hash of a batch job is what it always was: no runtime in it
        assert replace(job, priority_class="x").spec_hash == job.spec_hash


def test_the_runtime_is_part_of_the_spec_hash() -> None:
    batch, jobset = job_of(mxjob("a"), "batch"), job_of(mxjob("a"))
    assert batch.spec_hash != jobset.spec_hash
    assert job_of(queued(queue="x")).spec_hash != job_of(queued(queue="y")).spec_hash


# -- names ---------------------------------------------------------------------------------


def test_validate_says_the_exact_jobset_name_limit() -> None:
    # {name}-{rid}-scheduler-0-0-abcde: 63 characters at most, 26 of them not the name's
    fits = "a" * 37
    assert job_of(mxjob(fits, workers=10)).name == fits
    with pytest.raises(SpecError) as raised:
        job_of(mxjob("a" * 38, workers=10))
    assert "use at most 37 characters for this job's name" in str(raised.value)
    assert "is too long for JobSet" in str(raised.value)
    with pytest.raises(SpecError, match="must start with a letter: it runs on JobSet"):
        job_of(mxjob("9lives"))


def test_the_longest_batch_name_stays_valid_on_batch() -> None:
    assert job_of(mxjob("a" * 38, workers=10), "batch").runtime == "batch"


# -- rendering -----------------------------------------------------------------------------


def test_a_dist_job_is_one_jobset_with_one_replicated_job_per_role() -> None:
    job = job_of(mxjob("a", servers=2, workers=3, restart="Never"))
    (jobset,) = render_jobset(job, CTX)
    name = f"a-{job.runtime_id}"
    assert (jobset["kind"], jobset["metadata"]["name"]) == ("JobSet", name)
    spec = jobset["spec"]
    assert spec["network"] == {
        "enableDNSHostnames": True,
        "subdomain": name,
        "publishNotReadyAddresses": True,
    }
    assert spec["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["scheduler"]}
    assert spec["suspend"] is False
    roles = spec["replicatedJobs"]
    assert [(r["name"], r["replicas"]) for r in roles] == [
        ("scheduler", 1),
        ("server", 1),
        ("worker", 1),
    ]
    assert [r["template"]["spec"]["completions"] for r in roles] == [1, 2, 3]
    assert [r["template"]["spec"]["parallelism"] for r in roles] == [1, 2, 3]
    assert all(r["template"]["spec"]["completionMode"] == "Indexed" for r in roles)
    assert "dependsOn" not in roles[0]
    assert roles[2]["dependsOn"] == [{"name": "scheduler", "status": "Ready"}]
    env = {
        e["name"]: e
        for e in roles[2]["template"]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["DMLC_PS_ROOT_URI"]["value"] == f"{name}-scheduler-0-0.{name}"
    assert env["DMLC_ROLE"]["value"] == "worker"
    config = env["MX_CONFIG"]["value"].replace("$(MXGITOPS_TASK_INDEX)", "2")
    assert json.loads(config)["task"] == {"index": 2, "type": "worker"}
    assert json.loads(config)["cluster"]["worker"][2]["url"] == f"{name}-worker-0-2.{name}"
    # a disruption restarts the gang, uncounted (tests/planning/test_disruption.py); a failed
    # Never replica fails the job at once; no Service of ours
    assert spec["failurePolicy"]["rules"][0]["name"] == "disruption"
    assert spec["failurePolicy"]["rules"][1:] == [
        {
            "name": "replicaFailed",
            "action": "FailJobSet",
            "targetReplicatedJobs": ["scheduler", "server", "worker"],
        }
    ]
    assert spec["failurePolicy"]["maxRestarts"] == 0


def test_kubeflows_pod_labels_but_the_replica_index_on_each_role() -> None:
    """The index is each pod's completion index, which no template can carry: a selector
    on `training.kubeflow.org/replica-index` matches nothing on JobSet (the manual says)."""
    (jobset,) = render_jobset(job_of(mxjob("a", servers=2, workers=3)), CTX)
    for role in jobset["spec"]["replicatedJobs"]:
        labels = role["template"]["spec"]["template"]["metadata"]["labels"]
        kubeflow = {k: v for k, v in labels.items() if k.startswith("training.kubeflow.org/")}
        expected = {
            "training.kubeflow.org/job-name": "a",
            "training.kubeflow.org/replica-type": role["name"],
            "training.kubeflow.org/operator-name": "mxgitops",
        }
        if role["name"] == "server":
            expected["training.kubeflow.org/job-role"] = "master"
        assert kubeflow == expected


def test_exit_code_fails_at_once_on_a_permanent_code_and_restarts_the_gang_otherwise() -> None:
    doc = mxjob("a", restart="ExitCode", runPolicy={"backoffLimit": 3})
    (jobset,) = render_jobset(job_of(doc), CTX)
    policy = jobset["spec"]["failurePolicy"]
    assert policy["maxRestarts"] == 3 and policy["restartStrategy"] == "Recreate"
    assert policy["rules"][1]["onJobFailureReasons"] == ["PodFailurePolicy"]
    worker = jobset["spec"]["replicatedJobs"][2]["template"]["spec"]
    assert worker["backoffLimit"] == 0
    assert worker["podFailurePolicy"]["rules"][1]["onExitCodes"]["values"] == list(range(1, 128))


def test_a_queued_job_is_created_suspended_with_kueues_labels() -> None:
    doc = queued(priorityClass="high")
    doc["spec"]["runPolicy"]["activeDeadlineSeconds"] = 600
    job = job_of(doc)
    (plain,) = render_jobset(job, CTX)
    labels = plain["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team"
    assert labels["kueue.x-k8s.io/max-exec-time-seconds"] == "600"
    assert "kueue.x-k8s.io/priority-class" not in labels  # no such WorkloadPriorityClass
    assert plain["spec"]["suspend"] is True
    pods = [r["template"]["spec"]["template"]["spec"] for r in plain["spec"]["replicatedJobs"]]
    assert {p["priorityClassName"] for p in pods} == {"high"}
    named = replace(CTX, names={WORKLOAD_PRIORITY_CLASS: frozenset({"high"})})
    (known,) = render_jobset(job, named)
    assert known["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high"


def test_a_local_job_succeeds_with_its_worker() -> None:
    (jobset,) = render_jobset(
        job_of(queued(), "batch")
        if False
        else job_of(mxjob("l", servers=0, runPolicy={"schedulingPolicy": {"queue": "q"}})),
        CTX,
    )
    assert jobset["spec"]["successPolicy"]["targetReplicatedJobs"] == ["worker"]
    env = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][
        0
    ].get("env")
    assert not env  # a local job talks to no one


# -- reading state back ---------------------------------------------------------------------


def live(jobset: dict[str, Any], **status: Any) -> LiveJobSet:
    stored = json.loads(json.dumps(jobset))
    stored["metadata"].update(uid="u1", creationTimestamp="2026-01-01T00:00:00Z")
    stored["status"] = status
    return runtimes.group_live(LiveObjects(kinds={JOBSET: (stored,)}))[("ml", "a")]  # type: ignore[return-value]


def test_a_suspended_queued_jobset_without_a_workload_is_queued() -> None:
    (jobset,) = render_jobset(job_of(queued()), CTX)
    state, replicas = live(jobset).status()
    assert state is State.QUEUED
    assert {r.state for r in replicas} == {"Suspended"}


def test_kueue_reasons_are_read_from_its_workload() -> None:
    (jobset,) = render_jobset(job_of(queued()), CTX)
    stored = json.loads(json.dumps(jobset))
    stored["metadata"].update(uid="u1")
    workload = {
        "metadata": {
            "name": "w",
            "namespace": "ml",
            "ownerReferences": [
                {"kind": "JobSet", "name": stored["metadata"]["name"], "uid": "u1"}
            ],
        },
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "couldn't assign flavors to pod set worker: "
                    "insufficient quota for nvidia.com/gpu in flavor gpu",
                }
            ]
        },
    }
    group = runtimes.group_live(LiveObjects(kinds={JOBSET: (stored,), WORKLOAD: (workload,)}))
    state, replicas = group[("ml", "a")].status()
    assert state is State.QUEUED
    assert "insufficient quota for nvidia.com/gpu" in replicas[0].reason
    workload["status"]["conditions"].append(
        {
            "type": "Evicted",
            "status": "True",
            "reason": "Preempted",
            "message": "Preempted to accommodate a higher priority Workload",
        }
    )
    group = runtimes.group_live(LiveObjects(kinds={JOBSET: (stored,), WORKLOAD: (workload,)}))
    assert group[("ml", "a")].status()[0] is State.PREEMPTED


def test_conditions_decide_success_and_failure() -> None:
    (jobset,) = render_jobset(job_of(mxjob("a")), CTX)
    done = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}
    assert live(jobset, conditions=[done]).status()[0] is State.SUCCEEDED
    failed = {"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "boom"}
    found = live(jobset, conditions=[failed])
    assert found.status()[0] is State.FAILED
    failure = found.failure()
    assert failure is not None and failure.reason == "FailedJobs" and failure.message == "boom"


def test_kueues_suspend_is_never_an_edit_and_a_hand_edit_of_an_unqueued_one_is() -> None:
    (plain,) = render_jobset(job_of(queued()), CTX)
    admitted = json.loads(json.dumps(plain))
    admitted["spec"]["suspend"] = False  # Kueue admitted it
    assert compare(job_of(queued()), [admitted]) == []
    (own,) = render_jobset(job_of(mxjob("a")), CTX)
    edited = json.loads(json.dumps(own))
    edited["spec"]["suspend"] = True
    (patch,) = compare(job_of(mxjob("a")), [edited])
    assert patch.drift and patch.patch == {"spec": {"suspend": False}}


def test_a_first_sync_of_a_queued_job_creates_one_object() -> None:
    job = job_of(queued())
    result = plan([job], LiveObjects(), Ledger(), PlanOptions(instance="prod"))
    (change,) = result.changes
    assert [o["kind"] for o in change.creates] == ["JobSet"]
    # and a no-op once it lives
    (jobset,) = change.creates
    stored = json.loads(json.dumps(jobset))
    stored["metadata"]["uid"] = "u1"
    again = plan(
        [job], LiveObjects(kinds={JOBSET: (stored,)}), Ledger(), PlanOptions(instance="prod")
    )
    assert [c.action for c in again.changes] == ["unchanged"]


def test_render_prints_the_objects_of_each_job(tmp_path: Path) -> None:
    import yaml

    (tmp_path / "a.yaml").write_text(yaml.safe_dump(queued()))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(mxjob("b", servers=0)))
    result = CliRunner().invoke(main, ["render", "-n", "ml", str(tmp_path)])
    assert result.exit_code == 0, result.output
    kinds = [(d["kind"], d["metadata"]["name"][:1]) for d in yaml.safe_load_all(result.stdout)]
    assert kinds == [("JobSet", "a"), ("Job", "b")]
    listed = CliRunner().invoke(main, ["render", "-o", "json", "-n", "ml", str(tmp_path)])
    assert json.loads(listed.stdout)["kind"] == "List"
    (tmp_path / "c.yaml").write_text(
        "apiVersion: kubeflow.org/v1\nkind: MXJob\nmetadata: {name: C}\n"
    )
    bad = CliRunner().invoke(main, ["render", "-n", "ml", str(tmp_path)])
    assert bad.exit_code == 1


def test_what_a_jobset_cannot_change_in_place_replaces_it() -> None:
    """backoffLimit is maxRestarts, activeDeadlineSeconds the child Jobs' deadline (or
    Kueue's max execution time): immutable on a JobSet, so in its spec hash; a TTL is
    patched in place, as on batch."""
    base = job_of(mxjob("a"))
    for field, value in (("backoffLimit", 2), ("activeDeadlineSeconds", 60)):
        assert job_of(mxjob("a", runPolicy={field: value})).spec_hash != base.spec_hash
    ttl = job_of(mxjob("a", runPolicy={"ttlSecondsAfterFinished": 60}))
    assert ttl.spec_hash == base.spec_hash
    on_batch = job_of(mxjob("a", runPolicy={"backoffLimit": 2}), "batch")
    assert on_batch.spec_hash == job_of(mxjob("a"), "batch").spec_hash  # in place there


def test_objects_of_both_runtimes_are_one_job_that_any_spec_replaces() -> None:
    """A move between runtimes interrupted: the batch objects and the JobSet both go."""
    batch_job, jobset_job = job_of(mxjob("a"), "batch"), job_of(mxjob("a"))
    stored = [json.loads(json.dumps(o)) for o in render_job(batch_job, CTX)]
    (jobset,) = render_jobset(jobset_job, CTX)
    jobs = tuple(o for o in stored if o["kind"] == "Job")
    services = tuple(o for o in stored if o["kind"] == "Service")
    live_objects = LiveObjects(jobs=jobs, services=services, kinds={JOBSET: (jobset,)})
    (group,) = runtimes.group_live(live_objects).values()
    assert group.spec_hash is None and group.incomplete() is not None
    result = plan([jobset_job], live_objects, Ledger(), PlanOptions(instance="prod"))
    (change,) = result.changes
    assert change.action == "replace"
    assert {r.kind for r in change.deletes} == {"Job", "Service"}  # the JobSet is the new one's
    assert [o["kind"] for o in change.creates] == []  # it exists already: not created again


# -- which kinds a sync lists: the ledger's record of runtimes --------------------------

BATCH, BOTH = frozenset({"batch"}), frozenset({"batch", "jobset"})


@pytest.mark.parametrize(
    ("recorded", "desired", "skipped"),
    [
        (BATCH, "batch", {"JobSet"}),  # the one case that skips the LIST
        (BATCH, "jobset", set()),  # a desired job runs on JobSet: listed
        (BOTH, "batch", set()),  # a JobSet of ours may exist
        (None, "batch", set()),  # no ledger, no record, or an unreadable one
        (frozenset({"batch", "volcano"}), "batch", set()),  # a newer version's runtime
    ],
)
def test_jobsets_are_listed_unless_the_ledger_says_none_exists(
    recorded: frozenset[str] | None, desired: str, skipped: set[str]
) -> None:
    job = job_of(mxjob("a"), desired)
    assert runtimes.unlisted(recorded, [job]) == skipped


def test_a_job_moved_off_jobset_keeps_jobset_recorded_while_its_jobset_lives() -> None:
    """Found live and replaced by batch Jobs: the record says jobset until a sync that
    lists JobSets finds none (the one after the JobSet is gone)."""
    (jobset,) = render_jobset(job_of(mxjob("a")), CTX)
    moved = job_of(mxjob("a"), "batch")
    live = LiveObjects(kinds={JOBSET: (jobset,)})
    result = plan([moved], live, Ledger(runtimes=BOTH), PlanOptions(instance="prod"))
    (change,) = result.changes
    assert change.action == "replace" and [r.kind for r in change.deletes] == ["JobSet"]
    assert result.ledger.runtimes == BOTH and not result.ledger_changed
    assert result.recorded_first is None  # batch Jobs: always listed
    gone = plan([moved], LiveObjects(), Ledger(runtimes=BOTH), PlanOptions(instance="prod"))
    assert gone.ledger.runtimes == BATCH and gone.ledger_changed and gone.writes


def test_the_first_jobset_needs_its_record_written_before_anything_is_applied() -> None:
    job, other = job_of(queued()), job_of(mxjob("b"), "batch")
    for before in (Ledger(runtimes=BATCH), Ledger()):
        result = plan([job, other], LiveObjects(), before, PlanOptions(instance="prod"))
        assert result.recorded_first is not None
        assert result.recorded_first.runtimes == BOTH
        assert result.recorded_first.entries == before.entries
        assert result.records_first == (job.key,)  # the batch job does not wait for it
    recorded = plan([job], LiveObjects(), Ledger(runtimes=BOTH), PlanOptions(instance="prod"))
    assert recorded.recorded_first is None and recorded.records_first == ()


# -- a job Kueue runs on another cluster (MultiKueue) -----------------------------------------


def dispatched(
    jobset_status: dict[str, Any],
    workload_status: dict[str, Any],
    *,
    suspend: bool = False,
    clusters: tuple[dict[str, Any], ...] = (),
) -> runtimes.Live:
    """A queued job's JobSet as a MultiKueue manager holds it: its status mirrored from
    the worker's, no pod here, its Workload naming the worker."""
    (jobset,) = render_jobset(job_of(queued()), CTX)
    stored = json.loads(json.dumps(jobset))
    stored["metadata"].update(uid="u1", creationTimestamp="2026-01-01T00:00:00Z")
    stored["spec"]["suspend"] = suspend  # Kueue unsuspends it once a worker admits it
    stored["status"] = jobset_status
    workload = {
        "metadata": {
            "name": "w",
            "namespace": "ml",
            "ownerReferences": [{"kind": "JobSet", "name": "x", "uid": "u1"}],
        },
        "status": workload_status,
    }
    live = LiveObjects(
        kinds={JOBSET: (stored,), WORKLOAD: (workload,), MULTIKUEUE_CLUSTER: tuple(clusters)}
    )
    return runtimes.group_live(live)[("ml", "a")]


ON_WORKER_A = {
    "clusterName": "worker-a",
    "admissionChecks": [
        {
            "name": "multikueue",
            "state": "Ready",
            "message": 'The workload got reservation on "worker-a"',
        }
    ],
}


def roles(**counts: dict[str, int]) -> dict[str, Any]:
    return {"replicatedJobsStatus": [{"name": role, **c} for role, c in counts.items()]}


def test_a_job_run_on_another_cluster_is_read_from_its_mirrored_status_and_names_it() -> None:
    running = dispatched(
        roles(
            scheduler={"active": 1, "ready": 1},
            server={"active": 1, "ready": 1},
            worker={"active": 1, "ready": 1},
        ),
        ON_WORKER_A,
    )
    state, replicas = running.status()
    assert state is State.RUNNING
    assert {r.type: r.state for r in replicas} == {
        "SCHEDULER": "Running",
        "SERVER": "Running",
        "WORKER": "Running",
    }
    assert running.placement() == "worker-a"
    starting = dispatched(roles(scheduler={"active": 1}), ON_WORKER_A)  # its pod not ready
    assert starting.status()[0] is State.PENDING
    done = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}
    finished = dispatched({**roles(scheduler={"succeeded": 1}), "conditions": [done]}, ON_WORKER_A)
    assert finished.status()[0] is State.SUCCEEDED
    assert finished.placement() == "worker-a"


def multikueue_cluster(name: str, active: str, **condition: str) -> dict[str, Any]:
    """A MultiKueueCluster as the manager holds it: Kueue's Active condition."""
    found = {"type": "Active", "status": active, **condition}
    return {"metadata": {"name": name}, "status": {"conditions": [found]}}


def test_a_job_on_a_cluster_the_manager_cannot_reach_says_so_until_kueue_moves_it() -> None:
    """Before Kueue's workerLostTimeout, the manager's JobSet keeps the last status its
    worker mirrored: the job reads as it did, and says its cluster is unreachable."""
    running = roles(scheduler={"active": 1, "ready": 1}, worker={"active": 1, "ready": 1})
    lost = multikueue_cluster(
        "worker-a",
        "False",
        reason="ClientConnectionFailed",
        lastTransitionTime="2026-12-03T12:00:01Z",
    )
    other = multikueue_cluster("worker-b", "True", reason="Active")
    live = dispatched(running, ON_WORKER_A, clusters=(other, lost))
    assert live.status()[0] is State.RUNNING and live.placement() == "worker-a"
    assert live.unreachable() == (
        "cluster worker-a is unreachable since 2026-12-03T12:00:01Z (ClientConnectionFailed): "
        "the state shown is the last it reported; Kueue dispatches the job again after its "
        "workerLostTimeout, and it then runs again from the start"
    )
    assert dispatched(running, ON_WORKER_A, clusters=(other,)).unreachable() == ""
    reachable = multikueue_cluster("worker-a", "True", reason="Active")
    assert dispatched(running, ON_WORKER_A, clusters=(reachable,)).unreachable() == ""
    done = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}
    finished = {**roles(scheduler={"succeeded": 1}), "conditions": [done]}
    assert dispatched(finished, ON_WORKER_A, clusters=(lost,)).unreachable() == ""


def test_a_failure_on_another_cluster_names_the_role_and_why_there_is_no_log() -> None:
    failed = {"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "boom"}
    live = dispatched({**roles(worker={"failed": 1}), "conditions": [failed]}, ON_WORKER_A)
    assert live.status()[0] is State.FAILED
    failure = live.failure()
    assert failure is not None
    assert (failure.replica, failure.reason, failure.message) == ("WORKER", "FailedJobs", "boom")
    assert failure.log.startswith("log unavailable: its pods ran on cluster worker-a")


def test_a_job_holding_quota_waits_for_its_admission_check_in_kueues_words() -> None:
    reserved = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"}
    live = dispatched(
        {},
        {
            "conditions": [reserved],
            "admissionChecks": [{"name": "multikueue", "state": "Pending"}],
            "nominatedClusterNames": ["worker-b", "worker-a"],  # in no order: said sorted
        },
        suspend=True,
    )
    state, replicas = live.status()
    assert state is State.QUEUED
    assert replicas[0].reason == (
        "quota reserved; waiting for admission check multikueue: Pending; "
        "sent to cluster worker-a, worker-b, admitted by none yet (why is said on each of "
        "them, by its own Workload: this cluster's does not carry it)"
    )
    assert live.placement() == ""


def test_a_batch_job_runs_where_it_is_made() -> None:
    (job,) = [o for o in render_job(job_of(mxjob("a"), "batch"), CTX) if o["kind"] == "Job"][:1]
    group = runtimes.group_live(LiveObjects(jobs=(job,)))
    assert group[("ml", "a")].placement() == "" and group[("ml", "a")].unreachable() == ""
