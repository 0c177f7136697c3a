"""Suspend a dist job some of whose replicas finished, and resume it: it runs again whole,
as under Kubeflow's operator, which deleted every pod on suspend (finished ones too,
`DeletePodsAndServices`) and made them all anew on resume. A ps-lite job resumed
without the workers that had finished would wait for them for ever. Pure: plans."""

from __future__ import annotations

from pathlib import Path

from mxgitops.objects import JOB_NAME_LABEL, ObjectRef
from mxgitops.planning.changes import Action
from mxgitops.planning.ledger import Ledger
from mxgitops.planning.plan import plan
from mxgitops.runtimes.shared.state import State
from tests.helpers.jobs import BATCH, OPTIONS, finish, job, live, only
from tests.helpers.sync import (
    NS,
    Syncer,
    batch_job,
    job_objects,
    mxjob,
    repo,
    summary_of,
    write,
)
from tests.kubeapi.harness import KubeAPI

__all__ = ["repo"]  # the fixture, used here too

SUSPEND = {"runPolicy": {"suspend": True}}


def test_a_finished_replica_of_a_suspended_dist_job_is_made_anew_suspended() -> None:
    a = job("a", **SUSPEND)
    objects = finish(live(a), "-worker-")  # both workers done; scheduler, server suspended
    change = only(plan([a], objects, Ledger(runtimes=BATCH), OPTIONS))
    workers = sorted(ObjectRef.of(o) for o in objects.jobs if "-worker-" in o["metadata"]["name"])
    assert change.action is Action.REPAIR, change.reason
    assert sorted(change.deletes) == workers
    assert sorted(ObjectRef.of(o) for o in change.creates) == workers
    assert all(o["spec"]["suspend"] is True for o in change.creates)
    assert change.starts_after_deletes  # the same names: created once the old ones are gone
    assert "resumed whole" in change.reason
    assert change.state is not State.SUCCEEDED


def test_nothing_is_made_anew_while_it_runs_or_once_it_finished() -> None:
    running = job("a")
    assert only(plan([running], finish(live(running), "-worker-"), Ledger(), OPTIONS)).deletes == ()
    a = job("a", **SUSPEND)
    done = finish(finish(live(a), "-worker-"), "-scheduler-")
    assert only(plan([a], done, Ledger(runtimes=BATCH), OPTIONS)).state is State.SUCCEEDED
    assert not any(o["kind"] == "Job" for o in only(plan([a], done, Ledger(), OPTIONS)).creates)


def test_a_local_job_has_no_finished_replica_to_resume() -> None:
    local = job("l", servers=0, workers=1, **SUSPEND)
    objects = finish(live(local), "-worker-")
    change = only(plan([local], objects, Ledger(runtimes=BATCH), OPTIONS))
    assert change.state is State.SUCCEEDED and not change.creates


def test_a_dist_job_suspended_after_its_workers_finished_resumes_with_every_replica(
    kubeapi: KubeAPI, repo: Path
) -> None:
    run = Syncer(kubeapi, repo)
    write(repo, mxjob("paused", workers=2))
    run()
    kubeapi.run_job_controller(NS)
    for index in (0, 1):
        kubeapi.kubelet(
            job=batch_job(kubeapi, "paused", "worker", index), namespace=NS, phase="Succeeded"
        )
    write(repo, mxjob("paused", workers=2, runPolicy={"suspend": True}))
    suspending = summary_of(run(), "paused")
    assert suspending.action == "repair" and "resumed whole" in suspending.reason, suspending
    kubeapi.settle(NS)
    assert summary_of(run(), "paused").action == "unchanged"
    jobs = job_objects(kubeapi, "paused")
    assert len(jobs) == 4 and all(j["spec"].get("suspend") for j in jobs)
    assert not any((j.get("status") or {}).get("succeeded") for j in jobs)

    write(repo, mxjob("paused", workers=2))
    assert summary_of(run(), "paused").action == "update"
    kubeapi.run_job_controller(NS)
    running = {
        p["metadata"]["labels"]["job_type"]
        for p in kubeapi.objects("pods", NS)
        if p["metadata"]["labels"].get(JOB_NAME_LABEL) == "paused"
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    }
    assert running == {"SCHEDULER", "SERVER", "WORKER"}
    workers = [
        p
        for p in kubeapi.objects("pods", NS)
        if p["metadata"]["labels"].get("job_type") == "WORKER"
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    assert len(workers) == 2
