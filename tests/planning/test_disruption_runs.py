"""Disruption re-runs are bounded (issue 43): pure.

A job disrupted again and again (a node-pressure eviction that its own use caused but
Kubernetes did not say so, a node that keeps failing) would run again for ever, never
touching backoffLimit. The runs of one spec disrupted in a row are counted on the
objects each re-run makes; past the operator's `--max-disruption-runs` the job is
Failed, and says which disruptions it met.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from mxgitops import model
from mxgitops.objects import LiveObjects
from mxgitops.planning.changes import Action, Change, PlanOptions
from mxgitops.planning.ledger import Ledger
from mxgitops.planning.plan import plan
from mxgitops.runtimes.jobset.kinds import JOBSET
from mxgitops.runtimes.jobset.render import render_jobset
from mxgitops.runtimes.shared.reruns import DISRUPTIONS_ANNOTATION, disruptions_of
from mxgitops.runtimes.shared.state import State
from tests.helpers.jobs import BATCH_ONLY, CTX, OPTIONS, failed_pod, job, terminated
from tests.helpers.jobset import job_of
from tests.helpers.sync import mxjob
from tests.planning.test_disruption import FAIL_JOB, TAINT, disrupted, live_with


def evicted_worker(mx: model.MxJob, earlier: list[str]) -> LiveObjects:
    """`mx` live, its WORKER 1 evicted, its objects made by a re-run after `earlier`."""
    evicted = disrupted(failed_pod(terminated(137), name="w1"), TAINT, "node-7")
    objects = live_with(mx, "worker", 1, [evicted], failed=1, conditions=[FAIL_JOB])
    said = {DISRUPTIONS_ANNOTATION: json.dumps(earlier)} if earlier else {}

    def annotated(obj: dict[str, Any]) -> dict[str, Any]:
        metadata = obj["metadata"]
        return {**obj, "metadata": {**metadata, "annotations": {**metadata["annotations"], **said}}}

    return dataclasses.replace(
        objects,
        jobs=tuple(map(annotated, objects.jobs)),
        services=tuple(map(annotated, objects.services)),
    )


def change_of(mx: model.MxJob, objects: LiveObjects, runs: int) -> Change:
    options = dataclasses.replace(OPTIONS, max_disruption_runs=runs)
    (change,) = plan([mx], objects, BATCH_ONLY, options).changes
    return change


def test_a_disrupted_job_runs_again_and_its_new_objects_count_the_disruption() -> None:
    mx = job("d", restart="Never")
    change = change_of(mx, evicted_worker(mx, ["SERVER 0 preempted on node n2"]), runs=2)
    assert change.action is Action.REPLACE, change.reason
    assert (
        "runs again whole" in change.reason
        and "run again 2 of at most 2 times in a row" in change.reason
    ), change.reason
    for obj in change.creates:
        assert disruptions_of(obj) == (
            "SERVER 0 preempted on node n2",
            "WORKER 1 evicted: node node-7 NotReady or unreachable (DeletionByTaintManager: "
            "Taint manager: deleting due to NoExecute taint)",
        )


def test_one_disruption_past_the_bound_fails_the_job_listing_them() -> None:
    mx = job("d", restart="Never")
    earlier = ["SERVER 0 preempted on node n2", "WORKER 0 evicted from node n3"]
    change = change_of(mx, evicted_worker(mx, earlier), runs=2)
    assert (change.state, change.action) == (State.FAILED, Action.STOP), change.reason
    assert change.creates == ()
    failure = change.failure
    assert failure is not None and failure.replica == "WORKER 1"
    assert failure.reason == "DisruptionRunsExceeded"
    assert failure.message.startswith("disrupted 3 times in a row, past --max-disruption-runs 2:")
    for said in (*earlier, "WORKER 1 evicted: node node-7 NotReady"):
        assert said in failure.message
    assert "max-disruption-runs" in change.reason
    # The ledger records it Failed: the next sync does not run it again.
    options = dataclasses.replace(OPTIONS, max_disruption_runs=2)
    (entry,) = plan([mx], evicted_worker(mx, earlier), BATCH_ONLY, options).ledger.entries.values()
    assert entry.state == "Failed"


def test_no_re_run_at_all_with_a_bound_of_zero() -> None:
    mx = job("d", restart="Never")
    change = change_of(mx, evicted_worker(mx, []), runs=0)
    assert change.state is State.FAILED, change.reason


def test_what_the_objects_say_of_earlier_disruptions_is_bounded_and_checked() -> None:
    long = ["x" * 100_000, "WORKER 0 \u202eevicted\nfrom node n3"]
    obj = {"metadata": {"annotations": {DISRUPTIONS_ANNOTATION: json.dumps(long * 1000)}}}
    said = disruptions_of(obj)
    assert len(said) <= 100 and all(len(s) <= 300 for s in said)
    assert all(s.isprintable() for s in said)
    for value in ("not json", '{"a": 1}', "[1, 2]"):
        assert disruptions_of({"metadata": {"annotations": {DISRUPTIONS_ANNOTATION: value}}}) == ()


# -- JobSet: the JobSet controller restarts a disrupted gang itself, and counts it ------


def jobset_with(restarts: int, counted: int) -> tuple[model.MxJob, LiveObjects]:
    mx = job_of(mxjob("a", restart="Never"))
    (jobset,) = render_jobset(mx, CTX)
    jobset = json.loads(json.dumps(jobset))
    jobset["metadata"].update(uid="u1", creationTimestamp="2026-01-01T00:00:00Z")
    jobset["status"] = {"restarts": restarts, "restartsCountTowardsMax": counted}
    return mx, LiveObjects(kinds={JOBSET: (jobset,)})


@pytest.mark.parametrize(
    ("restarts", "counted", "failed"), [(2, 0, False), (3, 0, True), (3, 1, False)]
)
def test_a_jobset_restarted_on_disruptions_past_the_bound_fails(
    restarts: int, counted: int, failed: bool
) -> None:
    """`status.restarts` less `restartsCountTowardsMax`: the restarts its disruption rule
    made (`RestartJobSetAndIgnoreMaxRestarts`), uncounted by JobSet."""
    mx, objects = jobset_with(restarts, counted)
    options = dataclasses.replace(PlanOptions(instance="prod"), max_disruption_runs=2)
    (change,) = plan([mx], objects, Ledger(), options).changes
    assert (change.state is State.FAILED) is failed, change.reason
    if failed:
        assert change.action is Action.STOP
        assert change.failure is not None and change.failure.reason == "DisruptionRunsExceeded"
        assert "restarted whole by the JobSet controller after a disruption" in (
            change.failure.message
        )


def test_the_bound_is_the_operators_within_limits() -> None:
    from mxgitops.errors import ConfigError
    from mxgitops.manifests.repofile import OPERATOR_SETTINGS
    from mxgitops.settings.config import SyncConfig

    assert SyncConfig(repo="r").max_disruption_runs == 5
    for wrong in (-1, 101):
        with pytest.raises(ConfigError, match="max-disruption-runs must be between 0 and 100"):
            SyncConfig(repo="r", max_disruption_runs=wrong)
    assert OPERATOR_SETTINGS["maxDisruptionRuns"] == "--max-disruption-runs"
