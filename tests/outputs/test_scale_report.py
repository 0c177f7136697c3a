"""report at scale: a summary reads the change set once, however many jobs were written.

No timing here: a quadratic summary is caught by counting how often it walks the
change set's results (once), which holds at any size and on any machine.
"""

from __future__ import annotations

from collections.abc import Iterator

from mxgitops.outputs import report
from mxgitops.planning.changes import Action, Change, Plan
from mxgitops.state.apply import ChangeResult, ChangeSet

JOBS = 2_000


class _CountedResults(tuple[ChangeResult, ...]):
    """The change set's results, counting every walk over them."""

    walks = 0

    def __iter__(self) -> Iterator[ChangeResult]:
        type(self).walks += 1
        return super().__iter__()


def _written(count: int) -> tuple[Plan, ChangeSet]:
    changes = tuple(Change("ml", f"job-{n:05d}", Action.CREATE, "new job") for n in range(count))
    results = _CountedResults(
        ChangeResult(c, errors=(f"create job/{c.name}: boom",) if n % 7 == 0 else ())
        for n, c in enumerate(changes)
    )
    return Plan(changes), ChangeSet(results)


def test_summarize_walks_the_change_set_once_and_keeps_each_jobs_errors() -> None:
    the_plan, changeset = _written(JOBS)
    _CountedResults.walks = 0
    summary = report.summarize(the_plan, changeset)
    assert _CountedResults.walks == 1
    assert len(summary.jobs) == JOBS
    failed = [j.name for j in summary.jobs if j.errors]
    assert failed == [f"job-{n:05d}" for n in range(0, JOBS, 7)]
    assert summary.jobs[7].errors == ("create job/job-00007: boom",)
    assert summary.jobs[1].errors == ()


def test_summarize_keeps_the_first_result_of_a_job_as_for_job_does() -> None:
    the_plan, _ = _written(1)
    change = the_plan.changes[0]
    twice = ChangeSet((ChangeResult(change, errors=("first",)), ChangeResult(change)))
    assert report.summarize(the_plan, twice).jobs[0].errors == ("first",)
    assert twice.for_job(change.key) is twice.results[0]
