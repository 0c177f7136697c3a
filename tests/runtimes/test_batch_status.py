"""Status rules: replica state from Job and pods, aggregation, job state; live grouping."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from mxgitops import model, objects
from mxgitops.manifests import spec
from mxgitops.objects import LiveObjects, ObjectRef
from mxgitops.runtimes.batch.live import LiveJob, group_live
from mxgitops.runtimes.batch.render import render_job
from mxgitops.runtimes.batch.status import job_status, replica_state
from mxgitops.runtimes.shared.pods import is_retryable_termination
from mxgitops.runtimes.shared.podtemplate import RenderContext
from mxgitops.runtimes.shared.state import (
    MxReplicaStatus,
    ReplicaState,
    State,
    aggregate,
    job_state,
)
from tests.helpers.jobs import (
    EXIT_CODE,
    NEVER,
    ON_FAILURE,
    RUNNING,
    batch_job,
    failed_pod,
    pod,
    terminated,
)

R, S, F, U = (
    ReplicaState.RUNNING,
    ReplicaState.SUCCEEDED,
    ReplicaState.FAILED,
    ReplicaState.UNKNOWN,
)
T = model.ReplicaType
CTX = RenderContext(instance="prod", commit="c0ffee")


WAITING = {"waiting": {"reason": "ContainerCreating"}}


# -- one replica -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("restart", "pods", "expected"),
    [
        (NEVER, [pod(RUNNING)], R),
        (NEVER, [pod(WAITING)], R),
        (NEVER, [pod(terminated(0))], S),
        (NEVER, [failed_pod(terminated(1))], F),
        (NEVER, [failed_pod(terminated(137, reason="OOMKilled"))], F),
        (NEVER, [failed_pod(terminated(143, "terminated"))], F),
        (NEVER, [pod(terminated(1, "Traceback: ValueError"))], F),  # a sidecar still runs
        (ON_FAILURE, [pod(RUNNING, last=terminated(1, "boom"))], R),
        (ON_FAILURE, [pod(terminated(1, "boom"))], R),  # about to restart
        (ON_FAILURE, [pod(terminated(137, reason="OOMKilled"))], R),
        (ON_FAILURE, [failed_pod(terminated(1))], F),  # failed all the same (evicted)
        (ON_FAILURE, [pod(terminated(0), last=terminated(1, "boom"))], S),
        (EXIT_CODE, [failed_pod(terminated(1, "loss is NaN"))], F),
        (EXIT_CODE, [failed_pod(terminated(127, "command not found"))], F),
        (EXIT_CODE, [failed_pod(terminated(137, reason="OOMKilled"))], R),
        (EXIT_CODE, [failed_pod(terminated(143, "terminated"))], R),
        (EXIT_CODE, [failed_pod({})], R),  # evicted before its container ran
        (NEVER, [pod(RUNNING, last={})], R),
        (NEVER, [pod(None)], U),
        (NEVER, [pod(RUNNING, container="sidecar")], U),
        (NEVER, [pod({})], U),
        (NEVER, [], ReplicaState.PENDING),  # a batch Job whose pod is not made yet
    ],
    ids=[
        "never-running",
        "never-waiting",
        "never-exit-0",
        "never-exit-1-without-message",
        "never-oom-killed",
        "never-exit-143",
        "never-exit-1-container-done-pod-running",
        "on-failure-restarted",
        "on-failure-about-to-restart",
        "on-failure-oom-killed-restarts",
        "on-failure-pod-failed",
        "on-failure-exit-0-after-a-restart",
        "exit-code-1-permanent",
        "exit-code-127-permanent",
        "exit-code-oom-killed-retried",
        "exit-code-143-retried",
        "exit-code-evicted-retried",
        "empty-last-state-ignored",
        "no-container-status",
        "no-mxnet-container-status",
        "no-state-at-all",
        "no-pods",
    ],
)
def test_replica_state_from_the_newest_pod_by_restart_policy(
    restart: model.RestartPolicy, pods: list[dict[str, Any]], expected: ReplicaState
) -> None:
    assert replica_state(batch_job(restart=restart), pods) is expected


def test_a_counted_failure_fails_never_and_on_failure_replicas_even_once_replaced() -> None:
    retry = [pod(RUNNING)]
    assert replica_state(batch_job(restart=NEVER, failed=1), retry) is F
    kept = failed_pod(terminated(1), started="2025-12-31T00:00:00Z", name="old")
    assert replica_state(batch_job(restart=ON_FAILURE, failed=1), [kept, *retry]) is F
    # Under OnFailure a pod counted and gone failed too (the pod garbage collector deletes
    # failed pods), unless an Event about it says Kubernetes took it away (issue 43,
    # tests/planning/test_disruption.py).
    assert replica_state(batch_job(restart=ON_FAILURE, failed=1), retry) is F
    assert replica_state(batch_job(restart=EXIT_CODE, failed=1), retry) is R
    # An ExitCode retry on its way (no pod yet, or one not started) goes on: Running.
    pending = pod(WAITING)
    pending["status"]["phase"] = "Pending"
    assert replica_state(batch_job(restart=EXIT_CODE, failed=1), []) is R
    assert replica_state(batch_job(restart=EXIT_CODE, failed=1), [pending]) is R
    assert replica_state(batch_job(restart=EXIT_CODE), [pending]) is ReplicaState.PENDING


def test_newest_pod_wins_by_start_time_then_creation() -> None:
    old = pod(terminated(1, "boom"), started="2026-01-01T00:00:00Z", name="old")
    new = pod(RUNNING, started="2026-01-01T01:00:00Z", name="new")
    assert replica_state(batch_job(), [old, new]) is R
    assert replica_state(batch_job(), [new, old]) is R
    old_ok = pod(terminated(0), started="2026-01-01T00:00:00Z", name="a")
    new_bad = pod(
        terminated(2, "no"),
        started="2026-01-01T00:00:00Z",
        name="b",
        created="2026-01-01T00:00:01Z",
    )
    assert replica_state(batch_job(), [new_bad, old_ok]) is F


def test_a_pending_retry_counts_from_its_creation() -> None:
    failed = pod(
        terminated(1, "boom"),
        started="2026-01-01T00:00:00Z",
        created="2026-01-01T00:00:00Z",
        name="first",
    )
    pending = pod(WAITING, started=None, created="2026-01-01T00:05:00Z", name="retry")
    assert replica_state(batch_job(), [failed, pending]) is R


def test_the_batch_job_decides_first() -> None:
    failing_pod = [pod(terminated(1, "boom"))]
    assert replica_state(batch_job(succeeded=1), failing_pod) is S
    assert replica_state(batch_job(succeeded=1), []) is S
    failed = [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]
    assert replica_state(batch_job(conditions=failed), [pod(RUNNING)]) is F
    assert replica_state(batch_job(conditions=failed), []) is F
    not_failed = [{"type": "Failed", "status": "False"}]
    assert replica_state(batch_job(conditions=not_failed), [pod(RUNNING)]) is R
    assert replica_state(None, [pod(RUNNING)]) is U
    assert replica_state(batch_job(), []) is ReplicaState.PENDING


@pytest.mark.parametrize(
    ("state", "retryable"),
    [
        ({"exitCode": 137, "reason": "OOMKilled", "message": "m"}, True),
        ({"exitCode": 1}, False),
        ({"exitCode": 0}, False),  # a pod failed by another container: the operator's 0
        ({"exitCode": 1, "message": "m"}, False),
        ({"exitCode": 127, "message": "m"}, False),
        ({"exitCode": 128, "message": "m"}, True),
        ({"exitCode": 255}, True),
        ({}, True),
    ],
)
def test_is_retryable_termination(state: dict[str, Any], retryable: bool) -> None:
    assert is_retryable_termination(state) is retryable


# -- replica sets and jobs -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([S, S, S], S),
        ([S, F, R], F),
        ([S, R, U], R),
        ([S, S, U], U),
        ([U, U, U], U),
        ([R, R, R], R),
        ([F, U, U], F),
    ],
)
def test_replica_set_aggregation(states: list[ReplicaState], expected: ReplicaState) -> None:
    status = aggregate(T.WORKER, 3, states)
    assert status.state is expected
    assert status.type is T.WORKER
    assert sum(status.replicas_states.values()) == 3
    assert status.replicas_states == {s: states.count(s) for s in set(states)}


def sets(**states: ReplicaState) -> list[MxReplicaStatus]:
    return [
        MxReplicaStatus(model.ReplicaType[name], state, {state: 1})
        for name, state in states.items()
    ]


@pytest.mark.parametrize(
    ("mode", "policy", "statuses", "expected"),
    [
        ("local", "", sets(WORKER=S), State.SUCCEEDED),
        ("local", "", sets(WORKER=R), State.RUNNING),
        ("local", "", sets(WORKER=F), State.FAILED),
        ("local", "", sets(WORKER=U), State.RUNNING),
        ("dist", "", sets(SCHEDULER=S, SERVER=R, WORKER=R), State.SUCCEEDED),
        ("dist", "", sets(SCHEDULER=R, SERVER=R, WORKER=S), State.RUNNING),
        ("dist", "", sets(SCHEDULER=S, SERVER=F, WORKER=S), State.FAILED),
        ("dist", "", sets(SCHEDULER=R, SERVER=R, WORKER=F), State.FAILED),
        ("dist", "AllWorkers", sets(SCHEDULER=R, SERVER=R, WORKER=S), State.SUCCEEDED),
        ("dist", "AllWorkers", sets(SCHEDULER=S, SERVER=R, WORKER=R), State.RUNNING),
        ("dist", "AllWorkers", sets(SCHEDULER=R, SERVER=F, WORKER=S), State.FAILED),
    ],
)
def test_job_state_per_mode_and_success_policy(
    mode: str, policy: str, statuses: list[MxReplicaStatus], expected: State
) -> None:
    assert job_state(model.JobMode(mode), model.SuccessPolicy(policy), statuses) is expected


# -- from rendered objects ---------------------------------------------------------------------


def dist_job(workers: int = 2, policy: str = "", name: str = "mnist") -> model.MxJob:
    def replica(kind: str, replicas: int) -> dict[str, Any]:
        containers = [{"name": "mxnet", "image": "mxnet"}]
        template = {"spec": {"containers": containers, "restartPolicy": "Never"}}
        return {"replicas": replicas, "mxReplicaType": kind, "template": template}

    doc: dict[str, Any] = {
        "apiVersion": model.SEED_API_VERSION,
        "kind": model.SEED_KIND,
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "jobMode": "dist",
            "replicaSpecs": [
                replica("SCHEDULER", 1),
                replica("SERVER", 1),
                replica("WORKER", workers),
            ],
        },
    }
    if policy:
        doc["spec"]["successPolicy"] = policy
    return spec.from_manifest(doc)


def live_of(
    job: model.MxJob,
    pod_states: dict[str, dict[str, Any]],
    *,
    succeeded: tuple[str, ...] = (),
    created: str = "2026-01-01T00:00:00Z",
) -> LiveObjects:
    """The job's rendered objects as the cluster would list them, with a pod per Job."""
    jobs, services, pods = [], [], []
    for obj in render_job(job, CTX):
        obj = copy.deepcopy(obj)
        obj["metadata"]["creationTimestamp"] = created
        name = obj["metadata"]["name"]
        if obj["kind"] == "Service":
            services.append(obj)
            continue
        if name in succeeded:
            obj["status"] = {"succeeded": 1}
        jobs.append(obj)
        if name in pod_states:
            labels = {
                **obj["spec"]["template"]["metadata"]["labels"],
                "batch.kubernetes.io/job-name": name,
            }
            p = pod(pod_states[name], name=f"{name}-x", labels=labels)
            p["metadata"]["namespace"] = job.namespace
            pods.append(p)
    return LiveObjects(tuple(jobs), tuple(services), tuple(pods))


def names(job: model.MxJob) -> dict[str, str]:
    return {
        f"{t.role}{i}": model.job_object_name(job, t, i)
        for r in job.replica_specs
        for t, i in ((r.type, i) for i in range(r.replicas))
    }


def test_job_status_from_live_objects() -> None:
    job = dist_job(workers=2)
    n = names(job)
    live = live_of(
        job,
        {
            n["scheduler0"]: RUNNING,
            n["server0"]: RUNNING,
            n["worker0"]: terminated(0),
            n["worker1"]: RUNNING,
        },
    )
    state, statuses = job_status(job, live)
    assert state is State.RUNNING
    assert [(s.type, s.state, dict(s.replicas_states)) for s in statuses] == [
        (T.SCHEDULER, R, {R: 1}),
        (T.SERVER, R, {R: 1}),
        (T.WORKER, R, {S: 1, R: 1}),
    ]
    done = live_of(job, {n["server0"]: RUNNING}, succeeded=(n["scheduler0"],))
    assert job_status(job, done)[0] is State.SUCCEEDED


def test_job_status_ignores_other_runtimes_and_namespaces() -> None:
    job = dist_job(workers=2)
    other_runtime = dist_job(workers=3)
    stale = live_of(
        other_runtime, {n: terminated(1, "boom") for n in names(other_runtime).values()}
    )
    elsewhere = copy.deepcopy(live_of(job, {n: terminated(1, "boom") for n in names(job).values()}))
    for obj in elsewhere.all():
        obj["metadata"]["namespace"] = "other"
    assert job_status(job, elsewhere)[0] is State.RUNNING
    mixed = LiveObjects(
        stale.jobs + elsewhere.jobs,
        stale.services + elsewhere.services,
        stale.pods + elsewhere.pods,
    )
    state, statuses = job_status(job, mixed)
    assert state is State.RUNNING
    assert all(s.state is U for s in statuses)
    for obj in elsewhere.all():
        obj["metadata"]["namespace"] = "ml"
    assert job_status(job, elsewhere)[0] is State.FAILED


def test_a_failed_worker_fails_the_job() -> None:
    job = dist_job(workers=2)
    n = names(job)
    live = live_of(job, {n["scheduler0"]: RUNNING, n["worker1"]: terminated(3, "bad args")})
    state, statuses = job_status(job, live)
    assert state is State.FAILED
    assert statuses[2].replicas_states == {ReplicaState.PENDING: 1, F: 1}


# -- group_live and LiveJob -----------------------------------------------------------------


def test_group_live_groups_by_namespace_and_job_name() -> None:
    a, b = dist_job(name="a"), dist_job(name="b")
    la, lb = live_of(a, {names(a)["worker0"]: RUNNING}), live_of(b, {})
    stray = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "ml"}}
    live = LiveObjects(la.jobs + lb.jobs, la.services + lb.services, (*la.pods, stray))
    groups = group_live(live)
    assert list(groups) == [("ml", "a"), ("ml", "b")]
    group = groups[("ml", "a")]
    assert isinstance(group, LiveJob)
    assert group.key == ("ml", "a")
    assert (len(group.jobs), len(group.services), len(group.pods)) == (4, 1, 1)
    assert group.spec_hash == a.spec_hash
    assert group.runtime_id == a.runtime_id
    assert group.source is None  # rendered without a source path
    assert group.refs() == sorted(ObjectRef.of(o) for o in la.jobs + la.services)
    assert all(r.kind is not objects.Kind.POD for r in group.refs())
    assert group.orphan_pod_refs() == []


def test_live_job_source_when_all_agree() -> None:
    job = dist_job()
    live = live_of(job, {})
    for obj in live.jobs + live.services:
        obj["metadata"]["annotations"][objects.SOURCE_ANNOTATION] = "jobs/a.yaml"
    assert group_live(live)[("ml", "mnist")].source == "jobs/a.yaml"


def test_live_job_with_disagreeing_objects_has_no_spec_hash() -> None:
    old, new = dist_job(workers=2), dist_job(workers=3)
    lo, ln = live_of(old, {}), live_of(new, {}, created="2026-01-02T00:00:00Z")
    group = group_live(LiveObjects(lo.jobs + ln.jobs[:1], lo.services))[("ml", "mnist")]
    assert group.spec_hash is None
    assert group.runtime_id is None
    unannotated = copy.deepcopy(lo.jobs[0])
    del unannotated["metadata"]["annotations"][objects.SPEC_HASH_ANNOTATION]
    partial = group_live(LiveObjects((*lo.jobs[1:], unannotated)))[("ml", "mnist")]
    # Without its spec hash a Job does not add up: a stray, out of the vote.
    assert [s.ref for s in partial.strays] == [ObjectRef.of(unannotated)]
    assert partial.spec_hash == old.spec_hash
    assert partial.runtime_id == old.runtime_id


def test_mixed_runtimes_are_judged_by_the_newest_job() -> None:
    old, new = dist_job(workers=2), dist_job(workers=3)
    n_new = names(new)
    lo = live_of(old, {names(old)["worker0"]: terminated(1, "boom")})
    ln = live_of(new, {n_new["scheduler0"]: RUNNING}, created="2026-01-02T00:00:00Z")
    group = group_live(
        LiveObjects(lo.jobs + ln.jobs, lo.services + ln.services, lo.pods + ln.pods)
    )[("ml", "mnist")]
    state, statuses = group.status()
    assert state is State.RUNNING
    assert [sum(s.replicas_states.values()) for s in statuses] == [1, 1, 3]


def test_live_job_status_matches_job_status() -> None:
    job = dist_job(workers=3)
    n = names(job)
    live = live_of(
        job,
        {n["scheduler0"]: RUNNING, n["server0"]: RUNNING, n["worker1"]: terminated(3, "x")},
        succeeded=(n["worker0"],),
    )
    assert group_live(live)[("ml", "mnist")].status() == job_status(job, live)


def test_live_job_expects_replicas_whose_objects_are_gone() -> None:
    job = dist_job(workers=3)
    n = names(job)
    live = live_of(job, {}, succeeded=tuple(n.values()))
    last_worker_gone = LiveObjects(
        tuple(j for j in live.jobs if j["metadata"]["name"] != n["worker2"]), live.services
    )
    state, statuses = group_live(last_worker_gone)[("ml", "mnist")].status()
    assert statuses[2].replicas_states == {S: 2, U: 1}
    assert statuses[2].state is U
    assert state is State.SUCCEEDED  # the scheduler decides


def test_live_job_reads_the_success_policy_and_mode_back() -> None:
    job = dist_job(workers=2, policy="AllWorkers")
    n = names(job)
    live = live_of(job, {n["scheduler0"]: RUNNING}, succeeded=(n["worker0"], n["worker1"]))
    assert group_live(live)[("ml", "mnist")].status()[0] is State.SUCCEEDED
    assert job_status(job, live)[0] is State.SUCCEEDED
    without_annotations = copy.deepcopy(live)
    for obj in without_annotations.all():
        obj["metadata"].get("annotations", {}).pop("mxgitops.io/success-policy", None)
        obj["metadata"].get("annotations", {}).pop("mxgitops.io/replicas", None)
    group = group_live(without_annotations)[("ml", "mnist")]
    state, statuses = group.status()
    assert [s.type for s in statuses] == [T.SCHEDULER, T.SERVER, T.WORKER]  # from labels
    assert state is State.RUNNING  # default policy: the scheduler decides


def test_orphan_pods_are_reported_separately() -> None:
    job = dist_job(workers=1)
    n = names(job)
    live = live_of(job, {n["worker0"]: RUNNING, n["server0"]: RUNNING})
    no_worker_job = LiveObjects(
        tuple(j for j in live.jobs if j["metadata"]["name"] != n["worker0"]),
        live.services,
        live.pods,
    )
    group = group_live(no_worker_job)[("ml", "mnist")]
    assert group.orphan_pod_refs() == [ObjectRef(objects.Kind.POD, "ml", f"{n['worker0']}-x")]
    unlabelled = copy.deepcopy(no_worker_job)
    for p in unlabelled.pods:
        del p["metadata"]["labels"]["batch.kubernetes.io/job-name"]
    regrouped = group_live(unlabelled)[("ml", "mnist")]
    assert regrouped.orphan_pod_refs() == group.orphan_pod_refs()


# -- backoffLimit, job-wide -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "restarts", "failures", "past"),
    [
        (0, 0, 0, False),
        (0, 1, 0, True),  # the operator: any restart, when the limit is 0
        (0, 0, 1, True),
        (2, 1, 0, False),
        (2, 2, 0, True),  # restarts reach the limit (the operator's rule)
        (2, 0, 2, False),  # retried failures must exceed it (the Job controller's)
        (2, 0, 3, True),
        (2, 1, 1, True),  # mixed: the restarts' rule once any restarted
    ],
)
def test_the_backoff_limit_rule(limit: int, restarts: int, failures: int, past: bool) -> None:
    from mxgitops.runtimes.batch.status import is_past_backoff_limit

    assert is_past_backoff_limit(limit, restarts, failures) is past


def test_restarts_of_every_replica_count_against_one_backoff_limit() -> None:
    from mxgitops.runtimes.batch.status import JobShape, backoff_exceeded

    def restarted(count: int) -> dict[str, Any]:
        one = pod(RUNNING)
        one["status"]["phase"] = "Running"
        one["status"]["containerStatuses"][0]["restartCount"] = count
        return one

    doc_job = dist_job(workers=3)
    on_failure = copy.deepcopy(live_of(doc_job, {}))
    pods = []
    for obj in on_failure.jobs:
        obj["metadata"]["annotations"]["mxgitops.io/restart-policy"] = "OnFailure"
        labels = {**obj["spec"]["template"]["metadata"]["labels"]}
        if labels["job_type"] == "WORKER":
            one = restarted(1)
            one["metadata"]["labels"] = labels
            pods.append(one)
    live = LiveObjects(on_failure.jobs, on_failure.services, tuple(pods))
    shape = dataclasses.replace(JobShape.of(doc_job), backoff_limit=3)
    exceeded = backoff_exceeded(shape, live)
    assert exceeded is not None and exceeded[0] == (model.ReplicaType.WORKER, 0)
    assert "3 container restarts" in exceeded[1]
    assert job_status(doc_job, live)[0] is State.RUNNING  # the job's own limit: none
    assert backoff_exceeded(dataclasses.replace(shape, backoff_limit=4), live) is None
