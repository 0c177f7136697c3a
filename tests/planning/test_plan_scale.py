"""plan() at scale, by the work it does rather than the time it takes (issue 14): each
live object read once, each replica looked up once, the same work for every job, and
no reference cycle, which is what lets planning pause the cyclic collector."""

from __future__ import annotations

import gc
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest

from mxgitops import model
from mxgitops.objects import Kind, LiveObjects, ObjectRef
from mxgitops.planning.changes import Action, Plan
from mxgitops.planning.ledger import Ledger
from mxgitops.planning.plan import plan
from mxgitops.runtimes.batch import live as live_module
from mxgitops.runtimes.batch import ownership
from mxgitops.runtimes.batch import status as status_module
from mxgitops.runtimes.batch.live import group_live
from mxgitops.runtimes.batch.render import job_refs
from tests.helpers.jobs import COMPLETE, OPTIONS, job, live


def jobs(count: int, **kwargs: Any) -> list[model.MxJob]:
    return [job(f"job-{i:04d}", **kwargs) for i in range(count)]


def no_op(count: int, **kwargs: Any) -> tuple[list[model.MxJob], LiveObjects]:
    desired = jobs(count, **kwargs)
    return desired, live(*desired)


def plan_all(desired: list[model.MxJob], objects: LiveObjects) -> Plan:
    """Planned against the ledger of an instance that runs batch Jobs only (it says so)."""
    return plan(desired, objects, Ledger(runtimes=frozenset({"batch"})), OPTIONS)


@contextmanager
def counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> Iterator[Counter[str]]:
    """Count the calls of `module.name` (as that module sees it) while the block runs."""
    calls: Counter[str] = Counter()
    original: Callable[..., Any] = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return original(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(module, name, counted)
        yield calls


def test_a_no_op_plan_of_many_jobs_changes_nothing() -> None:
    desired, objects = no_op(30)
    result = plan_all(desired, objects)
    assert result.count(Action.UNCHANGED) == 30 and not result.writes


def test_each_jobs_replicas_annotation_is_parsed_once_not_once_per_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    desired, objects = no_op(20, workers=4, servers=2)  # 8 objects per job, one annotation
    with counting(monkeypatch, live_module, "parse_replicas_annotation") as calls:
        plan_all(desired, objects)
    assert calls["parse_replicas_annotation"] == 20


def test_a_spec_hash_yields_its_runtime_once_for_all_the_objects_that_carry_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    desired, objects = no_op(20, workers=4, servers=2)
    ownership._runtime_of.cache_clear()
    with counting(monkeypatch, ownership, "runtime_id_of") as calls:
        plan_all(desired, objects)
    assert calls["runtime_id_of"] == 20


@pytest.mark.parametrize("workers", [4, 64])
def test_each_object_is_sorted_to_its_replica_once_however_many_replicas(
    monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """Looking each replica up among all of its job's objects made a job's status
    quadratic in its replicas; they are sorted out in one pass."""
    desired, objects = no_op(3, workers=workers, servers=2)
    objects = LiveObjects(tuple({**o, "status": COMPLETE} for o in objects.jobs), objects.services)
    with counting(monkeypatch, status_module, "_replica_key") as calls:
        plan_all(desired, objects)
    assert calls["_replica_key"] == len(objects.jobs) + len(objects.pods)


def test_a_live_job_has_what_it_lists_by_kind_namespace_and_name() -> None:
    """`LiveJob.has` looks refs up by their text: the same answers as a set of refs."""
    a = job("a")
    (found,) = group_live(live(a)).values()
    assert all(found.has(ref) for ref in job_refs(a)) and set(found.refs()) == set(job_refs(a))
    scheduler = job_refs(a)[0]
    assert not found.has(ObjectRef(Kind.POD, scheduler.namespace, scheduler.name))
    assert not found.has(ObjectRef(scheduler.kind, "elsewhere", scheduler.name))
    assert not found.has(ObjectRef(scheduler.kind, scheduler.namespace, scheduler.name + "0"))


def python_calls(action: Callable[[], object]) -> int:
    calls = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return calls


def test_planning_does_the_same_work_for_every_job() -> None:
    """Every Python function call counted: 40 jobs cost twice what 20 do, over what
    planning costs whatever the number of jobs. No scan grows with the job count."""
    sizes = [no_op(n) for n in (10, 20, 40)]
    for args in sizes:
        plan_all(*args)  # what is computed once and kept (spec hashes, runtimes) is kept
    calls = [python_calls(lambda args=args: plan_all(*args)) for args in sizes]
    per_ten_jobs = calls[1] - calls[0]
    assert calls[2] - calls[1] == 2 * per_ten_jobs


def test_planning_makes_no_reference_cycle_so_the_paused_collector_misses_nothing() -> None:
    desired, objects = no_op(5)
    objects = LiveObjects(objects.jobs[1:], objects.services)  # a repair among them
    gc.collect()
    gc.disable()
    try:
        result = plan_all(desired[:-1], objects)  # and a prune
        assert gc.collect() == 0
    finally:
        gc.enable()
    assert {c.action for c in result.changes} == {Action.UNCHANGED, Action.REPAIR, Action.DELETE}


def test_the_collector_is_on_again_after_planning_and_off_if_it_was_off() -> None:
    desired, objects = no_op(2)
    plan_all(desired, objects)
    assert gc.isenabled()
    gc.disable()
    try:
        plan_all(desired, objects)
        assert not gc.isenabled()
    finally:
        gc.enable()
