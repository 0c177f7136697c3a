"""apply: exactly the plan's writes, deletes before creates, honest partial results."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from mxgitops.errors import ClusterForbidden, ClusterServerError
from mxgitops.objects import Create, Delete, LiveObjects, ObjectRef, Write, WriteResult
from mxgitops.planning.ledger import Ledger
from mxgitops.planning.plan import plan
from mxgitops.state.apply import WAITING_FOR_OLD_PODS, apply
from tests.helpers.jobs import OPTIONS, job, live


class Recorder:
    """A WriteAPI that records each batch, fails the writes it is told to (503 unless
    `error` says otherwise) and answers the others with the warnings `warn` gives."""

    def __init__(
        self,
        fail: Callable[[Write], bool] = lambda w: False,
        *,
        error: Callable[[], Exception] = lambda: ClusterServerError("injected", status=503),
        warn: Callable[[Write], tuple[str, ...]] = lambda w: (),
    ) -> None:
        self.batches: list[list[Write]] = []
        self.fail = fail
        self.error = error
        self.warn = warn

    def write(
        self, writes: Sequence[Write], on_done: Callable[[WriteResult], None] | None = None
    ) -> list[WriteResult]:
        self.batches.append(list(writes))
        results = [
            WriteResult(w, self.error()) if self.fail(w) else WriteResult(w, warnings=self.warn(w))
            for w in writes
        ]
        for result in results:
            if on_done is not None:
                on_done(result)
        return results

    def wait_gone(
        self, refs: Sequence[ObjectRef], *, timeout: float, tick: Callable[[], None]
    ) -> list[ObjectRef]:
        return []  # deleted at once


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
    # One line: the refused delete, the API's message and what it cost the job.
    (line,) = failed.errors
    assert line.startswith("delete job/b-server-")
    assert line.endswith(": injected; not started anew: its old objects could not all be deleted")
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


def test_a_refused_service_is_one_line_of_its_job_and_the_rest_goes_on() -> None:
    a, b = job("a"), job("b")
    message = 'the Kubernetes API refused POST /api/v1/namespaces/ml/services: forbidden: User "t"'
    api = Recorder(
        lambda w: isinstance(w, Create) and w.ref.name.startswith("a-scheduler"),
        error=lambda: ClusterForbidden(message),
    )
    changeset = apply(plan([a, b], LiveObjects(), Ledger(), OPTIONS), api)
    result_a, result_b = changeset.results
    (line,) = result_a.errors
    assert line.startswith("create service/a-scheduler-")
    assert line.endswith(f": {message}; not started: its batch Jobs need this first")
    assert not result_a.created
    assert result_b.ok and len(result_b.created) == 5


PODSECURITY = (
    'would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false '
    '(container "mxnet" must set securityContext.allowPrivilegeEscalation=false)'
)


def test_a_pod_security_warning_is_one_error_line_of_its_job() -> None:
    """Admission creates the batch Jobs and refuses their pods later: the job will not start."""
    a, b = job("a"), job("b")

    def warn(write: Write) -> tuple[str, ...]:
        name = write.ref.name
        if name.startswith("a-") and write.ref.kind == "Job":
            return (PODSECURITY,)
        return ("metadata.name: this name may be too long",) if name.startswith("b-") else ()

    changeset = apply(plan([a, b], LiveObjects(), Ledger(), OPTIONS), Recorder(warn=warn))
    result_a, result_b = changeset.results
    (line,) = result_a.errors
    assert line.startswith("create job/a-")
    assert line.endswith(
        f": {PODSECURITY} (and 3 more of its batch Jobs); its pods will be refused, "
        "so it will not start"
    )
    assert len(result_a.created) == 5 and result_a.warnings == ()
    assert result_b.ok and len(result_b.created) == 5
    assert len(result_b.warnings) == 5
    assert all(w.endswith(": metadata.name: this name may be too long") for w in result_b.warnings)
    assert not changeset.ok


def test_each_object_created_is_addressed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Applying a first sync of thousands of objects was mostly deriving their refs
    again: for every result, and each job's Service for every one of its objects."""
    jobs = [job(f"j{i}", workers=6) for i in range(5)]
    the_plan = plan(jobs, LiveObjects(), Ledger(), OPTIONS)
    creates = sum(len(c.creates) for c in the_plan.changes)
    derived: list[ObjectRef] = []
    of = ObjectRef.of

    def counted(obj: Any) -> ObjectRef:
        derived.append(of(obj))
        return derived[-1]

    monkeypatch.setattr(ObjectRef, "of", counted)
    changeset = apply(the_plan, Recorder())
    assert changeset.ok and sum(len(r.created) for r in changeset.results) == creates
    assert len(derived) <= creates + len(jobs)  # each object, and each job's Service first


class Lingering(Recorder):
    """A Recorder whose deleted objects stay (their pods terminating) for `polls` waits,
    or for good when `polls` is None."""

    def __init__(self, polls: int | None) -> None:
        super().__init__()
        self.polls = polls
        self.waited: list[list[ObjectRef]] = []

    def wait_gone(
        self, refs: Sequence[ObjectRef], *, timeout: float, tick: Callable[[], None]
    ) -> list[ObjectRef]:
        self.waited.append(list(refs))
        self.batches_before_wait = len(self.batches)
        tick()
        return [] if self.polls is not None else list(refs)


def test_a_replace_deletes_in_the_foreground_and_starts_once_the_old_runtime_is_gone() -> None:
    b_old, b_new, a = job("b"), job("b", workers=3), job("a")
    the_plan = plan([a, b_new], live(b_old), Ledger(), OPTIONS)
    replace = next(ch for ch in the_plan.changes if ch.name == "b")
    assert replace.starts_after_deletes
    api = Lingering(polls=1)
    ticks: list[None] = []
    changeset = apply(the_plan, api, while_waiting=lambda: ticks.append(None))
    deletes, *_ = api.batches
    assert all(isinstance(w, Delete) and w.foreground for w in deletes)
    assert api.waited == [list(replace.deletes)]
    assert api.batches_before_wait == 1  # after the deletes, before any create
    assert ticks  # the Lease is kept while waiting
    assert changeset.ok
    result = changeset.for_job(("ml", "b"))
    assert result is not None
    assert sorted(result.created) == sorted(ObjectRef.of(o) for o in replace.creates)


def test_a_replace_whose_old_pods_linger_is_started_by_a_later_sync() -> None:
    b_old, b_new, a = job("b"), job("b", workers=3), job("a")
    the_plan = plan([a, b_new], live(b_old), Ledger(), OPTIONS)
    api = Lingering(polls=None)
    changeset = apply(the_plan, api)
    created = {
        ObjectRef.of(w.obj).name.split("-")[0]
        for b in api.batches
        for w in b
        if isinstance(w, Create)
    }
    assert created == {"a"}  # b's new runtime waits; a new job does not wait for it
    result = changeset.for_job(("ml", "b"))
    assert result is not None and result.ok and not result.created
    assert result.waiting == WAITING_FOR_OLD_PODS
    assert len(result.deleted) == len(the_plan.changes[1].deletes)


def test_a_prune_deletes_in_the_background_and_waits_for_nothing() -> None:
    old = job("b")
    the_plan = plan([job("a"), job("c")], live(old, job("a"), job("c")), Ledger(), OPTIONS)
    api = Lingering(polls=None)
    apply(the_plan, api)
    deletes, *creates = api.batches
    assert not any(creates)
    assert deletes and all(isinstance(w, Delete) and not w.foreground for w in deletes)
    assert api.waited == []
