"""A commit that names again a spec the ledger records finished, while the live objects
are of another spec (a revert), on both runtimes: the finished spec is not started again,
the run of the spec Git no longer names runs to its end (`on-change: wait`) or is stopped,
and nothing starts after it. And a job's ttlSecondsAfterFinished acts only on the run the
ledger recorded, never on a later run of the same spec. Pure: plans, no cluster."""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from mxgitops.manifests.spec import from_manifest
from mxgitops.model import ON_CHANGE_ANNOTATION, MxJob
from mxgitops.objects import LiveObjects, ObjectRef
from mxgitops.planning.changes import Action, PlanOptions
from mxgitops.planning.ledger import Finished, Ledger
from mxgitops.planning.plan import plan
from mxgitops.runtimes.jobset.kinds import JOBSET
from mxgitops.runtimes.registry import render
from mxgitops.runtimes.shared.state import State
from tests.helpers.jobs import COMPLETE, CTX, NS, OPTIONS
from tests.helpers.sync import mxjob

RECORDED = OPTIONS.now or datetime.now(UTC)  # when the sync that recorded H1 ran
STAMP = RECORDED.isoformat(timespec="seconds")
BOTH = frozenset({"batch", "jobset"})
WAIT = {ON_CHANGE_ANNOTATION: "wait"}
RUNTIMES = ["batch", "jobset"]


def at(seconds: float) -> PlanOptions:
    """The options of a sync `seconds` after the one that recorded H1 finished."""
    return dataclasses.replace(OPTIONS, now=RECORDED + timedelta(seconds=seconds))


def spec(runtime: str, *, epochs: int, wait: bool = True, ttl: int | None = None) -> MxJob:
    """Job `a`, one spec per `epochs` (H1, H2, ...), on `runtime`."""
    doc = mxjob("a", args=["train.py", f"--epochs={epochs}"], annotations=WAIT if wait else None)
    if ttl is not None:
        doc["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": ttl}
    return from_manifest(doc, default_namespace=NS, default_runtime=runtime)


def objects_of(job: MxJob, *, created: float, finished: bool = False) -> LiveObjects:
    """`job`'s objects as a LIST returns them, made `created` seconds after the record of
    H1; running (their pods not yet reported), or every replica succeeded."""
    stamp = (RECORDED + timedelta(seconds=created)).strftime("%Y-%m-%dT%H:%M:%SZ")
    made = []
    for obj in render(job, CTX):
        stored = copy.deepcopy(obj)
        stored["metadata"].update(uid=f"u-{obj['metadata']['name']}", creationTimestamp=stamp)
        stored["status"] = {}
        made.append(stored)
    if finished:
        for obj in made:
            if obj["kind"] == "JobSet":
                obj["status"] = {"conditions": [{"type": "Completed", "status": "True"}]}
            elif obj["kind"] == "Job":
                obj["status"] = COMPLETE
    jobsets = tuple(o for o in made if o["kind"] == "JobSet")
    return LiveObjects(
        jobs=tuple(o for o in made if o["kind"] == "Job"),
        services=tuple(o for o in made if o["kind"] == "Service"),
        kinds={JOBSET: jobsets} if jobsets else {},
    )


def recorded(job: MxJob, state: str = "Succeeded") -> Ledger:
    return Ledger({job.key: Finished(NS, job.name, job.spec_hash, state, STAMP)}, runtimes=BOTH)


def refs(objects: LiveObjects) -> list[ObjectRef]:
    found = [*objects.jobs, *objects.services, *objects.of(JOBSET)]
    return sorted(ObjectRef.of(o) for o in found)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_revert_to_a_finished_spec_starts_nothing_and_the_running_one_runs_on(
    runtime: str,
) -> None:
    h1, h2 = spec(runtime, epochs=1), spec(runtime, epochs=2)
    book = recorded(h1)
    running = objects_of(h2, created=600)
    result = plan([h1], running, book, at(3600))
    (change,) = result.changes
    assert (change.action, change.creates, change.deletes) == (Action.HOLD, (), ())
    assert change.state is State.WAITING and change.runtime_id == h2.runtime_id
    assert f"succeeded at {STAMP}" in change.reason
    assert "change its spec" in change.reason
    assert "runs to its end" in change.reason and "nothing starts after it" in change.reason
    assert result.ledger.entries == book.entries and not result.ledger_changes


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_under_replace_the_running_run_of_the_spec_git_left_is_stopped(runtime: str) -> None:
    h1, h2 = spec(runtime, epochs=1, wait=False), spec(runtime, epochs=2, wait=False)
    book = recorded(h1)
    running = objects_of(h2, created=600)
    result = plan([h1], running, book, at(3600))
    (change,) = result.changes
    assert (change.action, change.creates) == (Action.STOP, ())
    assert sorted(change.deletes) == refs(running)
    assert change.state is State.SUCCEEDED  # the spec Git names, as recorded
    assert f"succeeded at {STAMP}" in change.reason and "stopped" in change.reason
    assert h2.runtime_id in change.reason and h1.runtime_id in change.reason
    assert result.ledger.entries == book.entries  # the stopped run is recorded as nothing


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_once_the_waited_run_finished_it_goes_and_nothing_starts_after_it(runtime: str) -> None:
    h1, h2 = spec(runtime, epochs=1), spec(runtime, epochs=2)
    book = recorded(h1, "Failed")
    done = objects_of(h2, created=600, finished=True)
    result = plan([h1], done, book, at(3600))
    (change,) = result.changes
    assert (change.action, change.creates) == (Action.STOP, ())
    assert sorted(change.deletes) == refs(done)
    assert change.state is State.FAILED and f"failed at {STAMP}" in change.reason
    # H2's success does not take the place of H1's record: Git names H1.
    assert result.ledger.entries == book.entries and not result.ledger_changes
    (after,) = plan([h1], LiveObjects(), result.ledger, at(3700)).changes
    assert (after.action, after.state, after.creates) == (Action.UNCHANGED, State.FAILED, ())


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_ttl_of_a_finished_spec_never_acts_on_a_later_run_of_it(runtime: str) -> None:
    """A run of H1 made after the ledger recorded H1 finished (by an earlier version, or
    under a ledger restored from a backup) is another run: the record's TTL, long passed,
    does not delete it while it runs; once it finishes it is recorded, and its own TTL
    counts from then."""
    h1 = spec(runtime, epochs=1, ttl=60)
    book = recorded(h1)
    later = objects_of(h1, created=600)
    result = plan([h1], later, book, at(3600))
    (change,) = result.changes
    assert (change.action, change.deletes, change.creates) == (Action.UNCHANGED, (), ())
    assert change.state not in (State.SUCCEEDED, State.FAILED)

    done = objects_of(h1, created=600, finished=True)
    seen = plan([h1], done, book, at(3600))
    (change,) = seen.changes
    assert (change.action, change.state, change.deletes) == (Action.UNCHANGED, State.SUCCEEDED, ())
    entry = seen.ledger.entries[h1.key]
    assert entry.finished_at == (RECORDED + timedelta(seconds=3600)).isoformat(timespec="seconds")
    (early,) = plan([h1], done, seen.ledger, at(3660)).changes
    assert (early.action, early.deletes) == (Action.UNCHANGED, ())
    (due,) = plan([h1], done, seen.ledger, at(3661)).changes
    assert (due.action, sorted(due.deletes)) == (Action.CLEAN, refs(done))


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_ttl_still_acts_on_the_run_the_ledger_recorded(runtime: str) -> None:
    h1 = spec(runtime, epochs=1, ttl=60)
    # Made before the sync that recorded it finished, and since then partly gone or not.
    own = objects_of(h1, created=-600, finished=True)
    (change,) = plan([h1], own, recorded(h1), at(61)).changes
    assert (change.action, sorted(change.deletes)) == (Action.CLEAN, refs(own))
