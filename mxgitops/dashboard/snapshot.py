"""What the dashboard shows, as values: the jobs of the branch's latest note, each with
the record of its run, and the filters, order and pages of the jobs page. Pure.

The loader (`loading.py`) reads the notes and hands them here; every page is a view of
one `Snapshot`, replaced whole at each refresh, so a page never mixes two refreshes.
Everything in it came from a note, which anyone who can push notes can write: strings
are cut to `MAX_TEXT` here, and escaped where they are rendered (the templates).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from mxgitops.outputs.summary import JobSummary, Summary
from mxgitops.record.reading import lower_is_better
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.runtimes.shared.failure import Failure

MAX_TEXT = 300  # characters of one field of a note shown (a log tail has its own bound)
MAX_LOG = 8000  # characters of a kept log tail shown
PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
MAX_QUERY = 100  # characters of a search text, and of a filter's value, read

# What needs a person first: failed, then waiting, then the rest; finished last.
_ATTENTION = {
    "failed": 0,
    "error": 0,
    "waiting": 1,
    "running": 2,
    "other": 3,
    "succeeded": 4,
}
_TONE_OF_STATE = {
    "failed": "failed",
    "pending": "waiting",
    "waiting": "waiting",
    "queued": "waiting",
    "suspended": "waiting",
    "preempted": "waiting",
    "running": "running",
    "succeeded": "succeeded",
}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def clean(text: str, most: int = MAX_TEXT) -> str:
    """`text` as it may be shown: no control or bidirectional characters, at most `most`
    characters (a cut one ends with "…")."""
    text = _CONTROL.sub("\ufffd", text.replace("\t", " "))
    return text if len(text) <= most else text[: most - 1] + "…"


@dataclass(frozen=True)
class Author:
    """Who made a commit, and when (the author date, RFC 3339): from git, untrusted."""

    name: str
    date: str


@dataclass(frozen=True)
class JobRow:
    """One job of the jobs page, with what its row and its page show."""

    job: JobSummary
    record: TrainingRecord | None
    author: Author | None

    @property
    def key(self) -> tuple[str, str]:
        return (self.job.namespace, self.job.name)

    @property
    def state(self) -> str:
        """The word shown: the job's state, else what the sync did ("error" first)."""
        if self.job.errors:
            return "error"
        return self.job.state or self.job.action

    @property
    def tone(self) -> str:
        """The state's colour class: failed, waiting, running, succeeded or other."""
        if self.job.errors:
            return "error"
        return _TONE_OF_STATE.get(self.job.state.lower(), "other")

    @property
    def attention(self) -> int:
        return _ATTENTION.get(self.tone, 3)

    @property
    def cluster(self) -> str:
        return self.job.placement or (self.record.cluster if self.record else "")

    @property
    def failure(self) -> Failure | None:
        return Failure.from_mapping(self.job.failure) if self.job.failure else None

    def key_metric(self) -> tuple[str, float] | None:
        """The metric a person looks at first: a validation one, else the first known,
        with its latest value."""
        if self.record is None or not self.record.log.latest:
            return None
        latest = self.record.log.latest
        name = min(latest, key=_metric_rank)
        return name, latest[name]

    def started(self) -> str:
        if self.record is not None and self.record.started:
            return self.record.started
        return self.author.date if self.author else ""

    def matches(self, text: str) -> bool:
        haystack = f"{self.job.namespace}/{self.job.name} {self.state} {self.cluster}"
        if self.author is not None:
            haystack += f" {self.author.name} {self.job.commit}"
        return text.lower() in haystack.lower()


def _metric_rank(name: str) -> tuple[int, int, str]:
    lowered = name.lower()
    validation = 0 if lowered.startswith(("validation", "val", "eval", "test")) else 1
    return (validation, 0 if not lower_is_better(name) else 1, lowered)


@dataclass(frozen=True)
class Snapshot:
    """The branch as the last refresh read it."""

    branch: str = ""
    tip: str = ""  # the branch's commit
    note_commit: str = ""  # the newest commit of the branch with a note ("" if none)
    summary: Summary | None = None
    refused: str = ""  # why the newest note was set aside, as `status` sets it aside
    rows: tuple[JobRow, ...] = ()
    by_key: Mapping[tuple[str, str], JobRow] = field(default_factory=dict)
    namespaces: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    read_at: str = ""  # when this snapshot was read: UTC, RFC 3339
    problem: str = ""  # why the last refresh failed ("" when it did not)


def snapshot(
    *,
    branch: str,
    tip: str,
    note_commit: str,
    summary: Summary | None,
    refused: str,
    records: Mapping[tuple[str, str], TrainingRecord],
    authors: Mapping[str, Author],
    read_at: str,
) -> Snapshot:
    """The snapshot of a branch whose newest note is `summary`, with each job's run's
    record (`records`, from the note of the commit that asked for it) and the authors
    of the commits that last changed each job."""
    jobs = summary.jobs if summary is not None else ()
    rows = [
        JobRow(
            job=job,
            record=records.get((job.namespace, job.name)) or job.record,
            author=authors.get(job.commit),
        )
        for job in jobs
    ]
    rows.sort(key=lambda row: (row.attention, row.job.namespace, row.job.name))
    return Snapshot(
        branch=branch,
        tip=tip,
        note_commit=note_commit,
        summary=summary,
        refused=refused,
        rows=tuple(rows),
        by_key={row.key: row for row in rows},
        namespaces=tuple(sorted({row.job.namespace for row in rows})),
        states=tuple(sorted({row.state for row in rows})),
        read_at=read_at,
    )


@dataclass(frozen=True)
class Query:
    """The jobs page's filters and page, as its URL gives them."""

    namespace: str = ""
    state: str = ""
    text: str = ""
    page: int = 1
    size: int = PAGE_SIZE

    @classmethod
    def of(cls, params: Mapping[str, Sequence[str]]) -> Query:
        def first(name: str) -> str:
            values = params.get(name) or [""]
            return values[0][:MAX_QUERY].strip()

        return cls(
            namespace=first("namespace"),
            state=first("state"),
            text=first("q"),
            page=_number(first("page"), 1, 1, 1_000_000),
            size=_number(first("size"), PAGE_SIZE, 1, MAX_PAGE_SIZE),
        )


def _number(text: str, default: int, low: int, high: int) -> int:
    if not text.isascii() or not text.isdigit():
        return default
    return max(low, min(high, int(text[:9])))


@dataclass(frozen=True)
class Page:
    rows: tuple[JobRow, ...]
    number: int
    pages: int
    matched: int


def select(rows: Iterable[JobRow], query: Query) -> Page:
    """The rows `query` asks for, in the snapshot's order (attention first), one page."""
    chosen = [
        row
        for row in rows
        if (not query.namespace or row.job.namespace == query.namespace)
        and (not query.state or row.state == query.state)
        and (not query.text or row.matches(query.text))
    ]
    pages = max(1, -(-len(chosen) // query.size))
    number = min(query.page, pages)
    start = (number - 1) * query.size
    return Page(tuple(chosen[start : start + query.size]), number, pages, len(chosen))


def age(stamp: str, now: datetime) -> str:
    """How long ago `stamp` (RFC 3339) was, in the largest unit: "3 h", "2 d"; "" if
    it is not a time."""
    try:
        then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return ""
    if then.tzinfo is None:
        return ""
    return duration(max(0.0, (now - then).total_seconds()))


def duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"
