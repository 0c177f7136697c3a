"""Status summaries: what a sync did and found, rendered for people and machines.

A `Summary` (`summary.py`, the value and its machine form) is built here from a plan
and the change set apply returned. It is
printed (text or JSON), and written as a git note on the synced commit: a
readable table followed by a machine-readable block that `parse_note` reads
back, so `mxgitops status` shows the same thing any later reader sees.

What a sync prints (text, `-o json`, `--dry-run`) is what this run saw and
did. The note is different: it must only change when something happened, so
a job that is merely "unchanged" keeps there the action recorded by the sync
that last acted on it (`for_note`), and a note that would only change its
time is rewritten at most once per `NOTE_REFRESH`, so its age still says
whether syncs run.

Names, problems and errors come from the jobs repository, so no rendering
lets them add a line (`markdown.visible`), and the markdown one keeps them in
code spans. The machine-readable block is the note's last line, right after a
line that is exactly the marker: text above it cannot forge or hide it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta

from mxgitops.outputs import recordtext, vouching
from mxgitops.outputs.markdown import code, text, visible
from mxgitops.outputs.notecheck import NoteError
from mxgitops.outputs.summary import JobSummary, ReplicaSummary, Summary
from mxgitops.planning.changes import Action, Change, Plan
from mxgitops.planning.ledger import JobKey
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.runtimes.shared.failure import Failure
from mxgitops.runtimes.shared.state import State
from mxgitops.state.apply import ChangeResult, ChangeSet
from mxgitops.words import counted

NOTE_MARKER = "--- mxgitops status (machine-readable, do not edit) ---"
NOTE_REFRESH = timedelta(hours=1)  # a note unchanged but for its time is rewritten this often
# The actions whose objects the synced commit submits (the live ones are replaced).
_SUBMITTING = frozenset({Action.CREATE, Action.REPLACE})
# States whose row says why the job does not run: the scheduler's words, or Kueue's.
WAITING_STATES = frozenset({State.PENDING, State.QUEUED, State.PREEMPTED, State.EVICTED})
_SYMBOLS = {
    Action.CREATE: "+",
    Action.REPLACE: "~",
    Action.REPAIR: "+",
    Action.UPDATE: "~",
    Action.DELETE: "-",
    Action.CLEAN: "-",
    Action.STOP: "-",
    Action.HOLD: "!",
    Action.UNCHANGED: " ",
}


def summarize(
    plan: Plan,
    changeset: ChangeSet | None,
    *,
    problems: Sequence[str] = (),
    warnings: Sequence[str] = (),
    commit: str = "",
    instance: str = "",
    dry_run: bool = False,
    synced_at: datetime | None = None,
    version: str = "",
) -> Summary:
    written = _results_by_job(changeset)
    jobs = [_job_summary(change, written.get(change.key), commit) for change in plan.changes]
    if changeset is not None and changeset.ledger_error:
        problems = [*problems, changeset.ledger_error]
    return Summary(
        commit,
        instance,
        tuple(jobs),
        tuple(problems),
        plan.prune_refused,
        dry_run,
        tuple(warnings),
        _rfc3339(synced_at) if synced_at is not None else "",
        version,
    )


def _results_by_job(changeset: ChangeSet | None) -> dict[JobKey, ChangeResult]:
    """Each job's write results, indexed in one pass: looking each job up in the change
    set (`ChangeSet.for_job`, a scan) made a summary quadratic in the jobs written."""
    results: dict[JobKey, ChangeResult] = {}
    for result in changeset.results if changeset is not None else ():
        results.setdefault(result.change.key, result)  # the first, as for_job
    return results


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _job_summary(change: Change, written: ChangeResult | None, synced: str) -> JobSummary:
    objects = [f"+{o['kind'].lower()}/{o['metadata']['name']}" for o in change.creates]
    objects = [f"-{r.kind.lower()}/{r.name}" for r in change.deletes] + objects
    objects += [f"~{p.describe()}" for p in change.patches]
    return JobSummary(
        namespace=change.namespace,
        name=change.name,
        action=change.action.value,
        # A replace whose old pods are still stopping says so: it starts next sync.
        reason=f"{change.reason}; {written.waiting}"
        if written and written.waiting
        else change.reason,
        state=str(change.state or ""),
        spec_hash=change.spec_hash or "",
        source=change.source,
        replicas=tuple(
            ReplicaSummary(
                type=str(r.type),
                state=str(r.state),
                replicas=sum(r.replicas_states.values()),
                states={str(k): v for k, v in r.replicas_states.items()},
            )
            for r in change.replicas
        ),
        objects=tuple(objects),
        errors=written.errors if written is not None else (),
        warnings=written.warnings if written is not None else (),
        runtime_id=change.runtime_id,
        state_reason=next((r.reason for r in change.replicas if r.reason), "")
        if change.state in WAITING_STATES
        else "",
        failure=asdict(change.failure) if change.failure is not None else None,
        commit=synced if change.action in _SUBMITTING else change.commit,
        placement=change.placement,
        unreachable=change.unreachable,
        queue=change.queue,
        record=change.record,
    )


def for_note(summary: Summary, previous: Summary | None) -> Summary:
    """The summary to write as the note, given the note there is: unchanged jobs keep
    their last real action, and the previous note stays as it is when only its time
    would change and it is younger than `NOTE_REFRESH`."""
    carried = carry_forward(summary, previous)
    if previous is None or replace(previous, synced_at=carried.synced_at) != carried:
        return carried
    then, now = _parse(previous.synced_at), _parse(carried.synced_at)
    if then is None or now is None or now - then >= NOTE_REFRESH:
        return carried
    return previous


def age(summary: Summary, now: datetime) -> str:
    """How long ago the note's sync ran, for people: "5 minutes ago"."""
    then = _parse(summary.synced_at)
    if then is None:
        return "of unknown age (written before notes carried their time)"
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            return f"{counted(seconds // size, unit)} ago"
    return f"{counted(seconds, 'second')} ago"


def _parse(stamp: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def carry_forward(summary: Summary, previous: Summary | None) -> Summary:
    """Keep the last real action of jobs that are merely unchanged now, so that a
    sync that changes nothing leaves the note as it was: the action of this
    instance's note, where this sync confirms it (the job's live runtime, its
    objects' names, the words mxgitops uses); nothing of a note it cannot vouch for."""
    if previous is None or previous.instance != summary.instance:
        return summary
    before = {(j.namespace, j.name, j.spec_hash): j for j in previous.jobs}
    jobs = []
    for job in summary.jobs:
        old = before.get((job.namespace, job.name, job.spec_hash))
        unchanged = job.action == Action.UNCHANGED.value and not job.errors
        # Only what the cluster confirms: the note may be anyone's (vouching.py).
        if unchanged and old is not None and vouching.carried(old, job):
            job = replace(job, action=old.action, reason=old.reason, objects=old.objects)
        if old is not None and old.runtime_id == job.runtime_id:
            job = replace(job, moved_from=vouching.moved_from(old, job))
            if job.runtime_id and _fuller(old.record, job.record):  # not read again
                job = replace(job, record=old.record)
        jobs.append(job)
    return replace(summary, jobs=tuple(jobs))


def _fuller(kept: TrainingRecord | None, now: TrainingRecord | None) -> bool:
    """Whether the record the note kept of a run says more than this sync's: none read,
    or only the ledger's summary of a finished run (no series), where the note holds the
    whole record."""
    if kept is None:
        return False
    return now is None or (not now.log.series and bool(kept.log.series))


# -- rendering ----------------------------------------------------------------


def render_plan(summary: Summary, *, verbose: bool = False) -> str:
    """A terraform-style plan: one line per job that is not unchanged, and why."""
    counts = summary.counts()
    order = [a.value for a in Action]
    tally = ", ".join(f"{counts[a]} {_past(a, summary.dry_run)}" for a in order if a in counts)
    header = "Plan" if summary.dry_run else "Sync"
    commit = f" of {summary.commit[:12]}" if summary.commit else ""
    lines = [f"{header}{commit} (instance {summary.instance}): {tally or 'no jobs'}"]
    for job in summary.jobs:
        if job.action == Action.UNCHANGED.value and not verbose and not job.errors:
            continue
        symbol = _SYMBOLS.get(Action(job.action), " ")
        lines.append(f"  {symbol} {job.action:<9} {job.qualified_name}: {job.reason}")
        if verbose or summary.dry_run:
            lines += [f"      {obj}" for obj in job.objects]
        lines += [f"      error: {e}" for e in job.errors]
        lines += [f"      warning: {w}" for w in job.warnings]
        lines += [f"      {line}" for line in job.details()]
    if summary.prune_refused:
        lines.append(f"Pruning refused: {summary.prune_refused}")
    lines += [f"Invalid: {p}" for p in summary.problems]
    return "\n".join(visible(line) for line in lines)


def render_table(summary: Summary) -> str:
    """The readable part of a note: one row per job."""
    rows = [tuple(visible(c) for c in row) for row in _rows(summary)]
    widths = [max(len(c) for c in column) for column in zip(*rows, strict=True)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    extra = [visible(line) for line in _extra(summary)]
    return "\n".join([visible(_title(summary)), "", *lines, *extra])


def render_markdown(summary: Summary) -> str:
    """The same table for a pull-request or chat message."""
    header, *body = _rows(summary)
    lines = [_markdown_row(header), "|" + "---|" * len(header)]
    lines += [
        _markdown_row((code(name, table=True), *(text(c, table=True) for c in cells)))
        for name, *cells in body
    ]
    commit = code(summary.commit[:12]) if summary.commit else "a working tree"
    title = f"**mxgitops status of {commit}**"
    title += f" (instance {code(summary.instance)})" if summary.instance else ""
    title += text(_when(summary))
    extra = [f"- {code(line)}" for job in summary.jobs for line in _job_details(job)]
    extra += [f"- {code(line)}" for job in summary.jobs for line in _training(job)]
    extra += [f"- invalid: {code(p)}" for p in summary.problems]
    extra += [f"- {code(w)}" for w in summary.warnings]
    if summary.prune_refused:
        extra.append(f"- pruning refused: {code(summary.prune_refused)}")
    return "\n".join([title, "", *lines, *(["", *extra] if extra else [])]) + "\n"


def _markdown_row(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cells) + " |"


def _rows(summary: Summary) -> list[tuple[str, ...]]:
    header: tuple[str, ...] = ("JOB", "STATE", "RUNTIME", "REPLICAS", "ACTION", "ERRORS")
    rows = [header] + [
        (
            job.qualified_name,
            job.state or "-",
            job.runtime_id or "-",
            "; ".join(r.describe() for r in job.replicas) or "-",
            job.action,
            "; ".join(job.errors) or "-",
        )
        for job in summary.jobs
    ]
    if not any(job.record for job in summary.jobs):
        return rows
    # A progress column beside the state, where a run's training record says something.
    progress = ["PROGRESS", *(recordtext.row_text(job.record) or "-" for job in summary.jobs)]
    return [(*row[:2], shown, *row[2:]) for row, shown in zip(rows, progress, strict=True)]


def _title(summary: Summary) -> str:
    title = f"mxgitops status of {summary.commit[:12] or 'a working tree'}"
    return title + (f" (instance {summary.instance})" if summary.instance else "") + _when(summary)


def _when(summary: Summary) -> str:
    when = f", synced {summary.synced_at}" if summary.synced_at else ""
    return when + (f" by mxgitops {summary.version}" if summary.version else "")


def _job_details(job: JobSummary) -> list[str]:
    """In markdown each detail is one code span: the log's lines joined."""
    lines = job.details()
    if job.failure and Failure.from_mapping(job.failure).log:
        head = [line for line in lines if not line.startswith("  ")]
        log = " ⏎ ".join(line[4:] for line in lines if line.startswith("  | "))
        return [*head, f"{job.qualified_name}: log: {log}"]
    return lines


def _training(job: JobSummary) -> list[str]:
    """What its run's training record says, one line each (`recordtext.lines`)."""
    if job.record is None:
        return []
    return [f"{job.qualified_name}: {line}" for line in recordtext.lines(job.record, job.state)]


def _extra(summary: Summary) -> list[str]:
    """Under the table: what each sync that acted did, and why; why jobs wait or failed."""
    extra = [
        f"{job.qualified_name}: {job.action}: {job.reason}"
        for job in summary.jobs
        if job.action != Action.UNCHANGED.value
    ]
    extra += [line for job in summary.jobs for line in job.details()]
    extra += [line for job in summary.jobs for line in _training(job)]
    extra += [f"invalid: {p}" for p in summary.problems]
    extra += list(summary.warnings)  # each reads "FILE:LINE: ... warning: ..."
    if summary.prune_refused:
        extra.append(f"pruning refused: {summary.prune_refused}")
    return ["", *extra] if extra else []


def render_json(summary: Summary) -> str:
    return json.dumps(summary.to_dict(), indent=2, sort_keys=True)


def submitting_commits(summary: Summary, limit: int) -> list[str]:
    """The first `limit` commits other than the synced one that live jobs name as the
    commit that submitted them (their objects' annotation), in the jobs' order."""
    named = (job.commit for job in summary.jobs if job.commit and job.commit != summary.commit)
    return list(dict.fromkeys(named))[:limit]


def with_commits(summary: Summary, known: Collection[str]) -> Summary:
    """`summary` with each job's submitting commit kept only if it is the synced one or
    in `known`: an annotation on a live object is anyone's to write who may edit it."""
    kept = {summary.commit, *known}
    jobs = tuple(job if job.commit in kept else replace(job, commit="") for job in summary.jobs)
    return replace(summary, jobs=jobs)


def with_authors(summary: Summary, authors: Mapping[str, str]) -> Summary:
    """`summary` with each job's author: that of its commit in `authors` (by commit)."""
    jobs = tuple(replace(job, author=authors.get(job.commit, "")) for job in summary.jobs)
    return replace(summary, jobs=jobs)


def render_note(summary: Summary) -> str:
    machine = json.dumps(summary.to_dict(), sort_keys=True, separators=(",", ":"))
    return f"{render_table(summary)}\n\n{NOTE_MARKER}\n{machine}\n"


def parse_note(note: str) -> Summary | None:
    """The summary in a note written by `render_note`, or None if it has none or it
    cannot be read (`read_note` says why)."""
    return read_note(note)[0]


def read_note(note: str) -> tuple[Summary | None, str]:
    """The summary in a note, and why it is set aside ("" if it is not): a note that
    is not valid JSON, or whose fields have the wrong types, is as good as none.

    Read from the end: the last line is the JSON (which never spans lines) and the
    one before it must be the marker, so a marker quoted in the table above (a
    field name, an error) changes nothing. A note without the marker is no status
    note at all (None, "").
    """
    *_, marker, machine = ["", "", *note.rstrip("\n").split("\n")]
    if marker != NOTE_MARKER:
        return None, ""
    try:
        return Summary.from_dict(json.loads(machine)), ""
    except RecursionError:
        return None, "ill-typed: nested too deep"
    except ValueError as error:  # NoteError, and JSONDecodeError
        what = str(error) if isinstance(error, NoteError) else "not valid JSON"
        return None, f"ill-typed: {what}"


def _past(action: str, dry_run: bool) -> str:
    if dry_run:
        return {"unchanged": "unchanged", "hold": "held"}.get(action, f"to {action}")
    return {
        "create": "created",
        "replace": "replaced",
        "repair": "repaired",
        "update": "updated",
        "delete": "deleted",
        "clean": "cleaned",
        "stop": "stopped",
        "hold": "held",
        "unchanged": "unchanged",
    }[action]
