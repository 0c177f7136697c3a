"""The training record in the commit status's description (`forge/wanted.py`): a
running run's progress in steps of 5 %, a finished run's first metric, within the
140 characters of GitHub (the shortest limit of the forges mxgitops posts to), after
the failures, and inert whatever the names."""

from __future__ import annotations

from dataclasses import replace

from mxgitops.outputs.forge.post import StatusSettings, post
from mxgitops.outputs.forge.wanted import MAX_DESCRIPTION, StatusState, wanted
from tests.forges import servers as forgeservers
from tests.helpers.records import (
    COMMIT,
    FINAL_VALIDATION_ACCURACY,
    finished_record,
    hostile_record,
    job,
    running_record,
    summary_with,
)


def description(*jobs: object) -> str:
    [status] = wanted(summary_with(*jobs), limit=10)  # type: ignore[arg-type]
    return status.description


def test_a_running_run_says_its_progress_and_a_finished_one_its_metric() -> None:
    assert description(job("resnet", "Running", running_record(5))) == "1 running (20% done)"
    done = description(job("resnet", "Succeeded", finished_record()))
    assert done == f"1 succeeded (validation-accuracy {FINAL_VALIDATION_ACCURACY})"


def test_progress_moves_in_steps_so_a_status_is_posted_seldom() -> None:
    """Every sync sees the percentage move; the description changes once per 5 %: a run
    of any length posts at most 21 running descriptions (GitHub keeps 1,000 a commit)."""
    record = running_record(declared_epochs=200)  # 1 of 200 epochs: 0.5 %
    assert record.progress.percent == 0.5
    assert description(job("long", "Running", record)) == "1 running (0% done)"
    said = set()
    for done in range(0, 201):
        log = replace(record.log, epoch=max(done, 1), finished=done > 0)
        said.add(description(job("long", "Running", replace(record, log=log))))
    assert len(said) == 21, sorted(said)


def test_several_jobs_name_the_run_and_failures_come_first() -> None:
    jobs = (job("a", "Running", running_record(5)), job("b", "Running", None))
    assert description(*jobs) == "2 running (ml/a 20% done)"
    failed = job(
        "broken-" + "x" * 90,
        "Failed",
        None,
        failure={"replica": "WORKER 0", "reason": "OOMKilled", "exit_code": 137},
    )
    said = description(*jobs, failed)
    assert said.startswith("2 running; failed: ml/broken-")  # no room: the progress goes
    assert len(said) <= MAX_DESCRIPTION


def test_no_record_and_no_total_say_nothing_more() -> None:
    assert description(job("plain", "Running", None)) == "1 running"
    unknown = replace(running_record(5), declared_epochs=None)
    assert description(job("resnet", "Running", unknown)) == "1 running"


def test_hostile_names_and_nan_are_bounded_and_inert_in_the_description() -> None:
    record = hostile_record()
    for state in ("Running", "Succeeded"):
        for first in range(len(record.log.latest)):
            names = list(record.log.latest)
            ordered = {n: 0.5 for n in names[first:] + names[:first]}
            shown = replace(record, log=replace(record.log, latest=ordered))
            said = description(job("evil", state, shown))
            assert len(said) <= MAX_DESCRIPTION
            assert said.isprintable(), said  # no escape, no new line
    nan = replace(record, log=replace(record.log, latest={"validation-accuracy": float("nan")}))
    assert description(job("evil", "Succeeded", nan)) == "1 succeeded"


def test_the_description_is_posted_to_a_forge_that_keeps_githubs_limit() -> None:
    """A loopback GitHub keeping its rules (tests/forges/servers.py: a description over
    140 characters is a 422)."""
    summary = summary_with(
        job("resnet", "Succeeded", finished_record()),
        job("evil", "Succeeded", hostile_record()),
    )
    with forgeservers.serving("github") as forge:
        settings = StatusSettings("github", forge.base, "org/jobs", forge.token, "", 60.0)
        assert post(summary, settings).posted == 1
        latest = forge.latest("org/jobs", COMMIT, "mxgitops/rec")
        assert latest is not None
        assert latest["state"] == StatusState.SUCCESS
        assert latest["description"] == (
            f"2 succeeded (ml/resnet validation-accuracy {FINAL_VALIDATION_ACCURACY})"
        )
