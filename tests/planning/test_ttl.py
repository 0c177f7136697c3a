"""ttlSecondsAfterFinished, job-wide: counted from the job's completion as mxgitops saw
it (the sync that recorded it in the ledger), as Kubeflow's operator counted it from the
MXJob's completion (`CleanupJob`), never by Kubernetes on one replica's batch Job or on
the JobSet, whose objects could be gone before any sync saw the job finish: a job run
again, or read Running for ever. Pure: plans and renderings, no cluster."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from mxgitops.manifests.spec import from_manifest
from mxgitops.objects import LiveObjects, ObjectRef
from mxgitops.planning.changes import Action, PlanOptions
from mxgitops.planning.ledger import Finished, Ledger
from mxgitops.planning.plan import plan
from mxgitops.runtimes.batch.render import render_job
from mxgitops.runtimes.jobset.kinds import JOBSET
from mxgitops.runtimes.jobset.render import render_jobset
from mxgitops.runtimes.shared.state import State
from tests.helpers.jobs import BATCH, CTX, NS, OPTIONS, finish, job, live, only
from tests.helpers.sync import mxjob

TTL = {"runPolicy": {"ttlSecondsAfterFinished": 60}}
RECORDED = OPTIONS.now or datetime.now(UTC)  # when the sync that recorded the job ran


def at(seconds: float) -> PlanOptions:
    """The options of a sync `seconds` after the one that recorded the job finished."""
    return dataclasses.replace(OPTIONS, now=RECORDED + timedelta(seconds=seconds))


def recorded(state: str, *jobs: Any) -> Ledger:
    stamp = RECORDED.isoformat(timespec="seconds")
    entries = {(NS, j.name): Finished(NS, j.name, j.spec_hash, state, stamp) for j in jobs}
    return Ledger(entries, runtimes=BATCH)


def test_no_batch_job_and_no_jobset_carries_the_ttl() -> None:
    batch = job("a", **TTL)
    assert all("ttlSecondsAfterFinished" not in o["spec"] for o in render_job(batch, CTX))
    queued = from_manifest(
        mxjob("q", runPolicy={**TTL["runPolicy"], "schedulingPolicy": {"queue": "team"}}),
        default_namespace=NS,
    )
    assert queued.runtime == "jobset"
    (jobset,) = render_jobset(queued, CTX)
    assert "ttlSecondsAfterFinished" not in jobset["spec"]


def test_a_job_seen_finished_keeps_its_objects_until_a_sync_has_recorded_it() -> None:
    a = job("a", **TTL)
    result = plan([a], finish(live(a), "-"), Ledger(runtimes=BATCH), at(3600))
    change = only(result)
    assert (change.action, change.state, change.deletes) == (Action.UNCHANGED, State.SUCCEEDED, ())
    assert result.ledger.entries[(NS, "a")].state == "Succeeded"


def test_its_objects_go_once_the_ttl_passed_since_the_sync_that_recorded_it() -> None:
    a = job("a", **TTL)
    objects, book = finish(live(a), "-"), recorded("Succeeded", a)
    early = only(plan([a], objects, book, at(60)))  # the operator: once after it
    assert (early.action, early.deletes) == (Action.UNCHANGED, ())
    due = plan([a], objects, book, at(61))
    change = only(due)
    assert (change.action, change.state) == (Action.CLEAN, State.SUCCEEDED)
    assert sorted(change.deletes) == sorted(ObjectRef.of(o) for o in render_job(a, CTX))
    assert "ttlSecondsAfterFinished 60" in change.reason
    assert due.ledger.entries == book.entries  # remembered: it never runs again
    gone = only(plan([a], LiveObjects(), book, at(3600)))
    assert (gone.action, gone.state, gone.creates) == (Action.UNCHANGED, State.SUCCEEDED, ())


def test_a_running_job_loses_nothing_to_the_ttl_whatever_its_replicas_did() -> None:
    a = job("a", **TTL)
    workers_done = finish(live(a), "-worker-")
    change = only(plan([a], workers_done, Ledger(runtimes=BATCH), at(3600)))
    assert (change.action, change.deletes) == (Action.UNCHANGED, ())
    assert change.state not in (State.SUCCEEDED, State.FAILED)


def test_a_failed_job_goes_by_the_ttl_too_and_keeps_its_state() -> None:
    a = job("a", servers=0, workers=1, **TTL)
    failed = {"conditions": [{"type": "Failed", "status": "True"}]}
    change = only(plan([a], finish(live(a), "-worker-", failed), recorded("Failed", a), at(61)))
    assert (change.action, change.state) == (Action.CLEAN, State.FAILED)


def test_a_queued_jobset_is_never_planned_new_once_the_ttl_took_it() -> None:
    doc = mxjob("q", runPolicy={**TTL["runPolicy"], "schedulingPolicy": {"queue": "team"}})
    queued = from_manifest(doc, default_namespace=NS)
    (jobset,) = render_jobset(queued, CTX)
    done = {"conditions": [{"type": "Completed", "status": "True"}]}
    objects = LiveObjects(kinds={JOBSET: ({**jobset, "status": done},)})
    ledger = Ledger(runtimes=frozenset({"batch", "jobset"}))
    seen = plan([queued], objects, ledger, at(0))
    assert (only(seen).action, only(seen).state) == (Action.UNCHANGED, State.SUCCEEDED)
    due = only(plan([queued], objects, seen.ledger, at(61)))
    assert (due.action, due.deletes) == (Action.CLEAN, (ObjectRef.of(jobset),))
    again = only(plan([queued], LiveObjects(), seen.ledger, at(3600)))
    assert (again.action, again.state) == (Action.UNCHANGED, State.SUCCEEDED)


def test_the_ttl_an_earlier_version_set_on_a_running_jobs_batch_jobs_is_taken_off() -> None:
    a = job("a", **TTL)
    legacy = {"mxgitops.io/in-place": '{"ttlSecondsAfterFinished":60}'}
    objects = live(a)
    batch = tuple(
        {
            **j,
            "metadata": {
                **j["metadata"],
                "annotations": {**j["metadata"]["annotations"], **legacy},
            },
            "spec": {**j["spec"], "ttlSecondsAfterFinished": 60},
        }
        for j in objects.jobs
    )
    change = only(plan([a], LiveObjects(batch, objects.services), Ledger(runtimes=BATCH), at(0)))
    assert change.action is Action.UPDATE
    assert {p.patch["spec"]["ttlSecondsAfterFinished"] for p in change.patches} == {None}
    assert len(change.patches) == len(batch)
