"""Which commit status each commit should show, decided from a sync's summary: pure.

The synced commit answers for everything the sync saw: every job, and the manifests
it could not read. Each other commit that submitted a job still live answers for
the jobs it submitted (`JobSummary.commit`, from the objects' commit annotation, kept
by the sync only for a commit of the synced history), so
the person who merged a pull request sees on that commit whether their job runs,
waits or failed. A state is:

- `failure` when a job failed, could not be written (the API refused it: RBAC,
  admission), or was refused (its manifest is invalid, the policy forbids it);
- `pending` while a job has not finished: pending, running, suspended, waiting for a
  change, and any state mxgitops does not know (a runtime's Queued, Preempted);
- `success` otherwise: every job succeeded, or there is none.

The description names what to act on first, the failures, and fits the 140
characters GitHub allows (the shortest limit of the three forges). Where there is
room it says, in brackets after the tally, how far the first run with a training
record is, or its first metric once finished (`recordtext.status_text`: words that
change seldom, as each change is a status posted).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from mxgitops.objects import FULL_COMMIT_ID
from mxgitops.outputs import recordtext
from mxgitops.outputs.markdown import visible
from mxgitops.outputs.summary import JobSummary, Summary
from mxgitops.runtimes.shared.failure import Failure

MAX_DESCRIPTION = 140
_FINISHED_OK = "Succeeded"
_GONE = frozenset({"delete", "clean", "stop"})  # whose row says what went, not what runs


class StatusState(StrEnum):
    PENDING = "pending"
    SUCCESS = "success"
    FAILURE = "failure"


@dataclass(frozen=True)
class Wanted:
    """The status one commit should show under mxgitops' context."""

    commit: str
    state: StatusState
    description: str
    running: bool = False  # a job runs (GitLab tells running from pending)


def context_of(instance: str) -> str:
    return f"mxgitops/{instance}"


def wanted(summary: Summary, *, limit: int) -> list[Wanted]:
    """The synced commit's status, then those of up to `limit` - 1 other commits that
    submitted live jobs (in the order their jobs appear)."""
    if not summary.commit:  # a working tree; a dry run has no sinks at all (`sinks_for`)
        return []
    found = [_status(summary.commit, summary.jobs, summary.problems)]
    by_commit: dict[str, list[JobSummary]] = {}
    for job in summary.jobs:
        submitted = job.commit != summary.commit and FULL_COMMIT_ID.fullmatch(job.commit)
        if submitted and job.action not in _GONE:
            by_commit.setdefault(job.commit, []).append(job)
    for commit, jobs in list(by_commit.items())[: max(0, limit - 1)]:
        found.append(_status(commit, jobs, ()))
    return found


def _status(commit: str, jobs: Sequence[JobSummary], problems: Sequence[str]) -> Wanted:
    failed = [_failed(job) for job in jobs]
    failures = [line for line in failed if line]
    failures += [f"invalid: {_first_word(p)}" for p in problems]
    counted = [job for job, line in zip(jobs, failed, strict=True) if not line]
    counts: dict[str, int] = {}
    for job in counted:
        if job.action not in _GONE and job.state:
            # where Kueue runs it on another cluster, the tally names it
            state = job.state.lower() + (f" on {job.placement}" if job.placement else "")
            state += " (unreachable)" if job.unreachable else ""
            counts[state] = counts.get(state, 0) + 1
    unfinished = any(
        job.state and job.state != _FINISHED_OK and job.action not in _GONE for job in counted
    )
    if failures:
        state = StatusState.FAILURE
    elif unfinished:
        state = StatusState.PENDING
    else:
        state = StatusState.SUCCESS
    tally = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=_by_weight))
    description = _fit(tally or ("no jobs" if not failures else ""), failures)
    trained = _training(counted)
    if trained and tally:  # after the tally, where it fits: the failures come first
        with_training = f"{tally} ({trained}){description[len(tally) :]}"
        description = with_training if len(with_training) <= MAX_DESCRIPTION else description
    running = any(job.state == "Running" for job in counted if job.action not in _GONE)
    return Wanted(commit, state, description, running)


def _training(jobs: Sequence[JobSummary]) -> str:
    """A few words of the first run with a training record (`recordtext.status_text`),
    named when the commit has several jobs; "" when none has anything to say."""
    shown = [job for job in jobs if job.record is not None and job.action not in _GONE]
    for job in shown:
        assert job.record is not None
        words = recordtext.status_text(job.record, job.state)
        if words:
            return words if len(jobs) == 1 else f"{visible(job.qualified_name)} {words}"
    return ""


def _failed(job: JobSummary) -> str:
    """What to say of a job that failed or was refused; "" when it did neither."""
    name = job.qualified_name
    if job.errors:
        return f"not written: {name}"
    if job.state == "Failed":
        if job.failure:
            failure = Failure.from_mapping(job.failure)
            return f"failed: {name} {failure.replica} {failure.reason or 'failed'}".strip()
        return f"failed: {name}"
    if job.action == "hold" and "policy forbids" in job.reason:
        return f"refused by policy: {name}"
    if job.action == "hold" and "invalid" in job.reason:
        return f"invalid: {name}"
    return ""


def _first_word(problem: str) -> str:
    """An invalid manifest's file: the text before its first colon."""
    return problem.split(":", 1)[0]


def _by_weight(item: tuple[str, int]) -> tuple[int, str]:
    order = ("running", "pending", "queued", "waiting", "suspended", "succeeded")
    state = item[0].split(" ", 1)[0]
    return (order.index(state) if state in order else len(order), item[0])


def _fit(tally: str, failures: Iterable[str]) -> str:
    """`tally; failed: a, b (+3 more)`, cut to MAX_DESCRIPTION characters."""
    failures = list(failures)
    head = f"{tally}; " if tally and failures else tally
    for shown in range(len(failures), 0, -1):
        rest = len(failures) - shown
        text = head + ", ".join(failures[:shown]) + (f" (+{rest} more)" if rest else "")
        if len(text) <= MAX_DESCRIPTION:
            return text
    text = head + (failures[0] if failures else "")
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"
