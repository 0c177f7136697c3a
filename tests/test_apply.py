"""apply: exactly the plan's writes, deletes before creates, honest partial results."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mxgitops.apply import apply
from mxgitops.errors import ClusterServerError
from mxgitops.ledger import Ledger
from mxgitops.objects import Create, Delete, LiveObjects, ObjectRef, Write, WriteResult
from mxgitops.plan import plan
from tests.test_plan import OPTIONS, job, live


class Recorder:
    """A WriteAPI that records each batch and fails the writes it is told to."""

    def __init__(self, fail: Callable[[Write], bool] = lambda w: False) -> None:
        self.batches: list[list[Write]] = []
        self.fail = fail

    def write(
        self, writes: Sequence[Write], on_done: Callable[[WriteResult], None] | None = None
    ) -> list[WriteResult]:
        self.batches.append(list(writes))
        results = [
            WriteResult(w, ClusterServerError("injected", status=503) if self.fail(w) else None)
            for w in writes
        ]
        for result in results:
            if on_done is not None:
                on_done(result)
        return results


def test_apply_does_the_plan_deletes_first() -> None:
    a, b_old, b_new, c = job("a"), job("b"), job("b", workers=3), job("c")
    the_plan = plan([a, b_new, c], live(b_old, c), Ledger(), OPTIONS)
    api = Recorder()
    done: list[WriteResult] = []
    changeset = apply(the_plan, api, on_done=done.append)
    deletes, services, creates = api.batches
    assert all(isinstance(w, Delete) for w in deletes)
    assert [w.ref.kind for w in services] == ["Service", "Service"]  # before what dials them
    creates += services
    assert all(isinstance(w, Create) for w in creates)
    replace = next(ch for ch in the_plan.changes if ch.name == "b")
    assert [w.ref for w in deletes] == list(replace.deletes)
    assert len(creates) == 5 + 6  # Jobs and the Service of a and of the new b
    assert len(done) == len(deletes) + len(creates)
    assert changeset.ok and not changeset.failed
    assert [r.change.name for r in changeset.results] == ["a", "b"]  # c writes nothing
    result = changeset.for_job(("ml", "b"))
    assert result is not None
    assert result.deleted == replace.deletes
    assert sorted(result.created) == sorted(ObjectRef.of(o) for o in replace.creates)
    assert changeset.for_job(("ml", "c")) is None


def test_a_job_whose_old_objects_survive_is_not_started_anew() -> None:
    b_old, b_new, a = job("b"), job("b", workers=3), job("a")
    the_plan = plan([a, b_new], live(b_old), Ledger(), OPTIONS)
    doomed = "-server-"
    api = Recorder(lambda w: isinstance(w, Delete) and doomed in w.ref.name)
    changeset = apply(the_plan, api)
    _, services, jobs = api.batches
    creates = services + jobs
    assert {ObjectRef.of(w.obj).name.split("-")[0] for w in creates if isinstance(w, Create)} == {
        "a"
    }
    (failed,) = changeset.failed
    assert failed.change.name == "b" and not failed.created
    assert len(failed.deleted) == len(failed.change.deletes) - 1
    assert failed.errors[0].startswith("delete job/b-server-")
    assert "injected" in failed.errors[0]
    assert failed.errors[-1] == "not started: its old objects could not all be deleted"
    assert not changeset.ok


def test_failed_creates_are_reported_per_job_and_the_rest_goes_on() -> None:
    a, b = job("a"), job("b")
    api = Recorder(lambda w: isinstance(w, Create) and "a-worker-" in w.ref.name)
    changeset = apply(plan([a, b], LiveObjects(), Ledger(), OPTIONS), api)
    result_a, result_b = changeset.results
    assert len(result_a.errors) == 2 and len(result_a.created) == 3
    assert result_b.ok and len(result_b.created) == 5


def test_a_plan_without_writes_writes_nothing() -> None:
    a = job("a")
    api = Recorder()
    changeset = apply(plan([a], live(a), Ledger(), OPTIONS), api)
    assert changeset.results == () and changeset.ok
    assert api.batches in ([], [[], [], []])
