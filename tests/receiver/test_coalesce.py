"""coalesce.py: one running sync and at most one waiting, whatever comes; what runs as
the cluster says, without losing a Job whose create raced a LIST."""

from __future__ import annotations

from mxgitops.receiver.coalesce import Coalescer, Decision
from mxgitops.receiver.webhook import Forge, Push


def push(n: int) -> Push:
    return Push(Forge.GITHUB, f"d-{n}", f"{n:064d}", "main", f"{n:040d}")


def start(coalescer: Coalescer, name: str) -> Push:
    taken = coalescer.take()
    assert taken is not None
    coalescer.launch(name)
    coalescer.launched(name)
    return taken


def test_ten_pushes_while_nothing_runs_start_one_sync_now_and_one_after() -> None:
    coalescer = Coalescer()
    assert coalescer.push(push(0)) is Decision.START
    assert start(coalescer, "job-0") == push(0)
    later = [coalescer.push(push(n)) for n in range(1, 10)]
    assert later == [Decision.QUEUED] + [Decision.COALESCED] * 8
    assert coalescer.take() is None  # job-0 runs
    coalescer.observed("job-0", ended=False)
    assert coalescer.take() is None
    coalescer.observed("job-0", ended=True)
    assert start(coalescer, "job-1") == push(1)
    coalescer.observed("job-1", ended=True)
    assert coalescer.take() is None  # the nine pushes started one sync


def test_pushes_before_the_start_are_covered_by_it() -> None:
    coalescer = Coalescer()
    assert coalescer.push(push(0)) is Decision.START
    assert coalescer.push(push(1)) is Decision.COALESCED  # not started yet: it will fetch 1
    start(coalescer, "job-0")
    coalescer.observed("job-0", ended=True)
    assert coalescer.take() is None


def test_a_scheduled_run_counts_as_running() -> None:
    coalescer = Coalescer()
    coalescer.listed({"mxgitops-29500000"}, {"mxgitops-29500000"}, coalescer.tick())
    assert coalescer.push(push(0)) is Decision.QUEUED
    assert coalescer.take() is None
    coalescer.observed("mxgitops-29500000", ended=True)
    assert coalescer.take() == push(0)


def test_a_replay_starts_nothing_and_does_not_wait() -> None:
    coalescer = Coalescer()
    assert coalescer.push(push(0)) is Decision.START
    start(coalescer, "job-0")
    coalescer.observed("job-0", ended=True)
    assert coalescer.push(push(0)) is Decision.REPLAYED
    assert coalescer.take() is None


def test_a_failed_create_waits_again_unless_a_newer_push_waits() -> None:
    coalescer = Coalescer()
    coalescer.push(push(0))
    taken = coalescer.take()
    assert taken is not None
    coalescer.launch("job-0")
    assert coalescer.push(push(1)) is Decision.QUEUED
    coalescer.failed("job-0", taken)
    assert coalescer.take() == push(1)  # the newer one covers both
    coalescer.launch("job-1")
    coalescer.failed("job-1", push(1))
    assert coalescer.take() == push(1)


def test_a_create_in_flight_outlives_a_list_that_misses_it() -> None:
    coalescer = Coalescer()
    coalescer.push(push(0))
    coalescer.take()
    coalescer.launch("job-0")
    coalescer.listed(set(), set(), coalescer.tick())  # the LIST was served before the POST
    assert coalescer.running()
    coalescer.launched("job-0")
    coalescer.listed(set(), set(), coalescer.tick() - 1)  # began before the create came back
    assert coalescer.running()
    coalescer.listed(set(), set(), coalescer.tick())  # began after: the Job is gone
    assert not coalescer.running()


def test_a_job_seen_by_the_watch_is_the_clusters_to_tell() -> None:
    coalescer = Coalescer()
    coalescer.push(push(0))
    start(coalescer, "job-0")
    coalescer.observed("job-0", ended=False)
    assert coalescer.launching == {}
    coalescer.listed({"job-0"}, {"job-0"}, coalescer.tick())
    assert coalescer.running()
    coalescer.observed("job-0", ended=True)
    assert not coalescer.running()


def test_a_job_of_the_same_delivery_made_before_is_not_waited_for() -> None:
    coalescer = Coalescer()
    coalescer.push(push(0))
    coalescer.take()
    coalescer.launch("job-0")
    coalescer.existed("job-0")
    assert not coalescer.running()
