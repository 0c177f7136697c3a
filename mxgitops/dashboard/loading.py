"""The dashboard's one edge: the branch and its notes, fetched and read into a `Snapshot`.

Each refresh brings the cache clone to the remote's branch and notes (under the cache's
lock, as `status` does), walks the branch's first-parent history, and reads the newest
note on it: the jobs page's jobs. A job's run's training record is in the note of the
commit that asked for the run (`JobSummary.commit`); those notes are read too, the
newest `MAX_RECORD_NOTES` of them, in one batch. A note is read once per blob: a
refresh that finds nothing new reads nothing again. A note `status` sets aside is set
aside here too, and the page says why.

Git runs in `source/githistory.py` (one `git log`, the notes listed from their trees,
blobs read in one `cat-file --batch`); a job's runs are `commands/history.py`'s.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from mxgitops.commands.history import Run, runs_at
from mxgitops.dashboard.snapshot import Author, Snapshot, clean, snapshot
from mxgitops.outputs import report
from mxgitops.outputs.summary import Summary
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.source import githistory
from mxgitops.source.repository import MAX_NOTE_SIZE, Repository

MAX_COMMITS = 5000  # of the branch walked: the newest note, and the authors of the jobs
MAX_RECORD_NOTES = 64  # notes read for the records of runs asked for by older commits
_CACHED_NOTES = 128
# Bytes of the notes kept parsed (a note may be up to MAX_NOTE_SIZE, 32 MiB).
_CACHED_NOTE_BYTES = 64 << 20
_CACHED_RUNS = 64
_SHORT_SHA = 7


@dataclass(frozen=True)
class CommitView:
    """A commit's page: who made it and what the note of its sync says."""

    sha: str
    author: Author | None
    summary: Summary | None
    refused: str  # why its note is set aside ("" when it is not, or there is none)
    noted: bool  # whether it has a note at all
    on_branch: bool


class _Lru(OrderedDict[object, object]):
    """The `most` entries used last, and of those no more than `most_bytes` by the sizes
    they were put with (the newest is kept whatever its size)."""

    def __init__(self, most: int, most_bytes: int | None = None) -> None:
        super().__init__()
        self.most, self.most_bytes = most, most_bytes
        self._sizes: dict[object, int] = {}

    def put(self, key: object, value: object, size: int = 0) -> None:
        self[key] = value
        self._sizes[key] = size
        self.move_to_end(key)
        while len(self) > self.most or (
            self.most_bytes is not None
            and len(self) > 1
            and sum(self._sizes.values()) > self.most_bytes
        ):
            oldest, _ = self.popitem(last=False)
            self._sizes.pop(oldest, None)


class Loader:
    """Reads snapshots of one branch of one repository; one git reader at a time."""

    def __init__(
        self,
        repository: Repository,
        *,
        branch: str | None,
        notes_ref: str,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.repository, self.branch, self.notes_ref = repository, branch, notes_ref
        self._now = now
        self._lock = threading.Lock()
        self._notes: _Lru = _Lru(
            _CACHED_NOTES, _CACHED_NOTE_BYTES
        )  # blob -> (summary, why set aside)
        self._runs: _Lru = _Lru(_CACHED_RUNS)  # (tip, notes, job) -> runs
        self._tip = ""
        self._state: tuple[str, int] = ("", 0)  # the tip and the notes read last
        self._authors: dict[str, Author] = {}

    def read(self) -> Snapshot:
        """The branch as the remote has it now."""
        with self._lock, self.repository.locked():
            tip = self.repository.sync(self.branch).commit
            commits = githistory.first_parent_log(self.repository.reader(), tip, most=MAX_COMMITS)
            notes = githistory.note_blobs(self.repository.reader(), self.notes_ref)
            self._tip, self._state = tip, (tip, hash(frozenset(notes.items())))
            self._authors = {c.sha: Author(clean(c.author), c.date) for c in commits}
            newest = next((c.sha for c in commits if c.sha in notes), "")
            summary, refused = self._summaries([notes[newest]])[0] if newest else (None, "")
            records = self._records(summary, newest, notes)
        return snapshot(
            branch=self.branch or "",
            tip=tip,
            note_commit=newest,
            summary=summary,
            refused=refused,
            records=records,
            authors=self._authors,
            read_at=self._now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        )

    def runs(self, namespace: str, name: str) -> tuple[list[Run], list[str]]:
        """The job's runs across the branch's commits, newest first, as `history` reads
        them from the last refresh's tip, and the warnings of notes set aside."""
        key = (self._state, namespace, name)
        cached = self._runs.get(key)
        if cached is not None:
            return cached  # type: ignore[return-value]
        warnings: list[str] = []
        with self._lock, self.repository.locked():
            if not self._tip:
                return [], []
            found = runs_at(
                self.repository.reader(),
                self._tip,
                notes_ref=self.notes_ref,
                namespace=namespace,
                name=name,
                warn=lambda message: warnings.append(clean(message)),
            )
        self._runs.put(key, (found, warnings))
        return found, warnings

    def commit(self, sha: str) -> CommitView:
        """The commit `sha` (a full id, checked by the caller) and its note."""
        with self._lock, self.repository.locked():
            notes = githistory.note_blobs(self.repository.reader(), self.notes_ref)
            summary, refused = self._summaries([notes[sha]])[0] if sha in notes else (None, "")
        return CommitView(
            sha=sha,
            author=self._authors.get(sha),
            summary=summary,
            refused=refused,
            noted=sha in notes,
            on_branch=sha in self._authors,
        )

    # -- notes, read once per blob ----------------------------------------------------

    def _summaries(self, blobs: list[str]) -> list[tuple[Summary | None, str]]:
        unread = [blob for blob in blobs if blob not in self._notes]
        bodies, too_large = githistory.read_blobs(
            self.repository.reader(), unread, max_size=MAX_NOTE_SIZE
        )
        read_now: dict[str, object] = {}
        for blob in unread:
            if blob in too_large:
                read: tuple[Summary | None, str] = (
                    None,
                    f"too large (over {MAX_NOTE_SIZE} bytes), or not a note",
                )
            else:
                read = report.read_note(bodies[blob].decode("utf-8", errors="replace"))
            read_now[blob] = read
            self._notes.put(blob, read, size=len(bodies.get(blob, b"")))
        found = []
        for blob in blobs:
            if blob in self._notes:
                self._notes.move_to_end(blob)
                found.append(self._notes[blob])
            else:  # read in this batch, and already put out by the bytes it was over
                found.append(read_now[blob])
        return found  # type: ignore[return-value]

    def _records(
        self, summary: Summary | None, newest: str, notes: Mapping[str, str]
    ) -> dict[tuple[str, str], TrainingRecord]:
        """Each job's run's record from the note of the commit that asked for the run."""
        if summary is None:
            return {}
        asking = {
            (job.namespace, job.name): job.commit
            for job in summary.jobs
            if job.commit and job.commit != newest
        }
        newest_first = {sha: index for index, sha in enumerate(self._authors)}
        older = sorted(
            {sha for sha in asking.values() if sha in notes},
            key=lambda sha: newest_first.get(sha, len(newest_first)),
        )[:MAX_RECORD_NOTES]
        records: dict[tuple[str, str], TrainingRecord] = {}
        for sha, (note, _) in zip(older, self._summaries([notes[s] for s in older]), strict=True):
            for job in note.jobs if note is not None else ():
                key = (job.namespace, job.name)
                if job.record is not None and asking.get(key) == sha:
                    records.setdefault(key, job.record)
        return records


def short(sha: str) -> str:
    return sha[:_SHORT_SHA]
