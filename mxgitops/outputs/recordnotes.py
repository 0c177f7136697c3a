"""Where a run's training record is kept: the note of the commit that asked for the run.

A run's record lives in that commit's note, in the run's JobSummary (`record`); a
sync reads it back there (`kept`) to fold the next chunk of the log into it, and
writes the new one there (`write`): read, change that job's JobSummary, write, so the
rest of the note stays as the sync of that commit left it. The synced commit's own
note carries it too, as every sync's summary does.

A note is anyone's to write who may push notes: only commits of the synced history
are read or written (a commit named by a live object's annotation is vouched for
first), only a note of this instance is changed, only the JobSummary of the same run
(its runtime id); a record of the wrong shape is read as none (`read_record`). A commit
whose note is missing or unreadable is left as it is: its run's record is still in the
synced commit's note and, once it finished, in the ledger.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace

from mxgitops.outputs import report
from mxgitops.outputs.summary import JobSummary, Summary
from mxgitops.planning.ledger import JobKey
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.source import repository as source
from mxgitops.state.training import Previous, Run


def kept(repository: source.Repository | None, synced: str, notes_ref: str) -> Previous:
    """The records the notes keep of the runs a sync follows: each from the note of the
    commit that asked for it, else from the synced commit's note."""

    def read(runs: Sequence[Run]) -> Mapping[JobKey, TrainingRecord]:
        if repository is None or not synced:
            return {}
        asked = {run.commit for run in runs if run.commit and run.commit != synced}
        commits = {synced, *repository.in_history(synced, asked)}
        notes = {commit: _summary(repository, commit, notes_ref) for commit in commits}
        found: dict[JobKey, TrainingRecord] = {}
        for run in runs:
            for commit in (run.commit, synced):
                job = _job(notes.get(commit), run.key, run.runtime_id)
                if job is not None and job.record is not None:
                    found[run.key] = job.record
                    break
        return found

    return read


def write(
    repository: source.Repository, summary: Summary, changed: Collection[JobKey], notes_ref: str
) -> int:
    """Write the records `changed` in this sync into the notes of the commits that asked
    for their runs (other than the synced one, whose note the sync writes whole); the
    notes written."""
    by_commit: dict[str, list[JobSummary]] = {}
    for job in summary.jobs:
        if (
            (job.namespace, job.name) in changed
            and job.record is not None
            and job.commit not in ("", summary.commit)
        ):
            by_commit.setdefault(job.commit, []).append(job)
    written = 0
    for commit, jobs in sorted(by_commit.items()):
        note = _summary(repository, commit, notes_ref)
        if note is None or note.instance != summary.instance:
            continue
        updated = _with_records(note, jobs)
        if updated != note and repository.write_note(
            commit, report.render_note(updated), notes_ref=notes_ref
        ):
            written += 1
    return written


MOST_ASKING_NOTES = 100  # notes `whole` reads for one status: it stays a few git reads


def whole(repository: source.Repository, summary: Summary, notes_ref: str) -> Summary:
    """`summary` (a note, as `status` shows it) with each finished run's whole record
    from the note of the commit that asked for it, where the note holds only the ledger's
    summary of it (no series: the sync no longer reads a finished run's log)."""
    wanting = [
        job
        for job in summary.jobs
        if job.record is not None
        and not job.record.log.series
        and job.commit not in ("", summary.commit)
    ]
    asked = sorted({job.commit for job in wanting})[:MOST_ASKING_NOTES]
    if not asked:
        return summary
    notes = {
        c: _summary(repository, c, notes_ref) for c in repository.in_history(summary.commit, asked)
    }
    records = {}
    for job in wanting:
        there = _job(notes.get(job.commit), (job.namespace, job.name), job.runtime_id)
        if there is not None and there.record is not None and there.record.log.series:
            records[(job.namespace, job.name, job.runtime_id)] = there.record
    return replace(
        summary,
        jobs=tuple(
            replace(j, record=records.get((j.namespace, j.name, j.runtime_id), j.record))
            for j in summary.jobs
        ),
    )


def _with_records(note: Summary, jobs: Iterable[JobSummary]) -> Summary:
    """`note` with each of `jobs`' run's JobSummary carrying its new record."""
    records = {(j.namespace, j.name, j.runtime_id): j.record for j in jobs}
    return replace(
        note,
        jobs=tuple(
            replace(j, record=records[(j.namespace, j.name, j.runtime_id)])
            if (j.namespace, j.name, j.runtime_id) in records
            else j
            for j in note.jobs
        ),
    )


def _summary(repository: source.Repository, commit: str, notes_ref: str) -> Summary | None:
    try:
        return report.read_note(repository.read_note(commit, notes_ref=notes_ref) or "")[0]
    except source.NoteTooLarge:
        return None


def _job(note: Summary | None, key: JobKey, runtime_id: str) -> JobSummary | None:
    if note is None:
        return None
    return next(
        (j for j in note.jobs if (j.namespace, j.name) == key and j.runtime_id == runtime_id),
        None,
    )
