"""What a no-op sync costs per listed object and per job, counted, not timed: the LISTs
read through the page reader a sync uses, then the plan, over a fixed input of dist
jobs (`helpers/noopcost.py`). Each listed object is decoded once and checked once, a
job whose live objects carry its spec hash is compared by it (nothing rendered, no
hash derived twice), and the Python work per object and per job stays within a budget
about twice today's, so a change that makes the no-op quadratic, or several times
heavier, fails here (docs/guides/scale.md has the timed figures)."""

from __future__ import annotations

import gc
import json
import tracemalloc
from typing import Any

import pytest

from mxgitops import model
from mxgitops.kube import listdecode, listing
from mxgitops.objects import LiveObjects
from mxgitops.planning import plan as plan_module
from mxgitops.planning.changes import Action, Plan
from mxgitops.planning.ledger import Finished, Ledger
from mxgitops.planning.plan import plan
from mxgitops.runtimes import registry
from mxgitops.runtimes.batch import live as live_module
from mxgitops.runtimes.batch import status as status_module
from mxgitops.runtimes.shared import livecheck
from tests.helpers.jobs import OPTIONS
from tests.helpers.noopcost import counting, dist_jobs, list_bodies, python_calls, read_lists

BATCH = Ledger(runtimes=frozenset({"batch"}))
OBJECTS_PER_JOB = 8  # 7 batch Jobs and the scheduler's Service
# Python function calls, measured when this was written (48 per listed object, 555 per
# job), with room for what the readers may yet need: about twice that.
READ_CALLS_PER_OBJECT = 100
PLAN_CALLS_PER_JOB = 1_100
# Bytes a listed batch Job or Service is kept in (about 2,000 measured, its pod template
# and managedFields dropped and its strings shared): a template kept would be 3 times that.
KEPT_BYTES_PER_OBJECT = 3_000


def no_op_plan(live: LiveObjects, jobs: int, ledger: Ledger = BATCH) -> Plan:
    """The plan of `jobs` dist jobs, read afresh (no spec hash derived yet), over `live`."""
    done = plan(dist_jobs(jobs), live, ledger, OPTIONS)
    assert done.count(Action.UNCHANGED) == jobs and not done.writes
    return done


def listed(jobs: int) -> LiveObjects:
    return read_lists(list_bodies(dist_jobs(jobs)))


class _CountingDecoder:
    """The page reader's JSON decoder, counting the values it decodes."""

    def __init__(self) -> None:
        self.runs = 0

    def raw_decode(self, text: str, at: int = 0) -> tuple[Any, int]:
        self.runs += 1
        return json.JSONDecoder().raw_decode(text, at)


def test_each_listed_object_is_decoded_once_and_checked_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Decoded once: again only where a chunk of the body cut it (one per chunk at most)."""
    bodies = list_bodies(dist_jobs(20))
    decoder = _CountingDecoder()
    monkeypatch.setattr(listdecode, "_DECODER", decoder)
    with counting(monkeypatch, (listing, "_check"), (livecheck, "status_problem")) as calls:
        live = read_lists(bodies)
    objects = len(live.jobs) + len(live.services)
    assert objects == OBJECTS_PER_JOB * 20
    assert calls["_check"] == objects
    assert calls["status_problem"] == len(live.jobs)  # a Service's metadata has none
    members = 2 * 7  # each list's kind, apiVersion, metadata and items: keys and values
    chunks = sum(len(body) // listing.LIST_READ_SIZE + 1 for body in bodies.values())
    assert objects <= decoder.runs - members <= objects + chunks


def test_a_no_op_plan_renders_nothing_and_hashes_each_job_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The desired jobs are read afresh, so each spec hash is derived here: once, and no
    hash an earlier version gave is derived for a job the ledger holds nothing of."""
    live = listed(20)
    with counting(
        monkeypatch,
        (plan_module, "render_job"),
        (registry, "render"),
        (model, "_canonical_json"),
        (status_module.Replicas, "of"),
        (live_module, "shape_status"),
    ) as calls:
        no_op_plan(live, 20)
    assert calls["render_job"] == calls["render"] == 0
    assert calls["_canonical_json"] == 20
    assert calls["of"] == 20  # each job's objects sorted to their replicas once for all readings
    assert calls["shape_status"] == 20


def test_earlier_hashes_are_derived_only_for_jobs_the_ledger_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ledger entry of another spec of job-00003 (run before its manifest changed)."""
    other = Finished("ml", "job-00003", "0" * 64, "Succeeded", "2026-01-01T00:00:00Z")
    ledger = Ledger({other.key: other}, runtimes=frozenset({"batch"}))
    live = listed(20)
    with counting(monkeypatch, (model, "_canonical_json")) as calls:
        no_op_plan(live, 20, ledger)
    assert calls["_canonical_json"] == 20 + 2  # and job-00003's hashes of two earlier eras


def test_the_no_op_work_per_listed_object_and_per_job_stays_within_its_budget() -> None:
    """Every Python call of reading the LISTs and planning, at 20 and 40 jobs: what 20
    more jobs add, per listed object and per job. Linear, and within budget."""
    reads, plans = {}, {}
    for jobs in (10, 20, 40):
        bodies = list_bodies(dist_jobs(jobs))
        live = read_lists(bodies)
        reads[jobs] = python_calls(lambda bodies=bodies: read_lists(bodies))
        desired = dist_jobs(jobs)
        plan(desired, live, BATCH, OPTIONS)  # what is derived once and kept (hashes) is kept
        plans[jobs] = python_calls(
            lambda desired=desired, live=live: plan(desired, live, BATCH, OPTIONS)
        )
    per_object = (reads[40] - reads[20]) / (OBJECTS_PER_JOB * 20)
    per_job = (plans[40] - plans[20]) / 20
    assert per_object <= READ_CALLS_PER_OBJECT, per_object
    assert per_job <= PLAN_CALLS_PER_JOB, per_job
    # Twice the jobs, twice the work: no work proportional to the jobs is done per job.
    assert plans[40] - plans[20] == 2 * (plans[20] - plans[10])
    assert reads[40] - reads[20] <= 2.1 * (reads[20] - reads[10])  # chunks are bytes, not items


def test_a_listed_object_is_kept_in_a_bounded_number_of_bytes() -> None:
    kept = {}
    for jobs in (20, 40):
        bodies = list_bodies(dist_jobs(jobs))
        gc.collect()
        tracemalloc.start()
        try:
            live = read_lists(bodies)
            kept[jobs] = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        assert len(live.jobs) == 7 * jobs
    per_object = (kept[40] - kept[20]) / (OBJECTS_PER_JOB * 20)
    assert per_object <= KEPT_BYTES_PER_OBJECT, per_object
