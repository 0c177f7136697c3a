"""Every run of one job across its branch's history: `mxgitops history NAMESPACE/JOB`.

A run starts where a commit of the tracked branch changed the job's manifest (wherever
the job is defined then: a renamed file, or a job moved to another file, is the same job;
a change the YAML parser sees no difference in, a comment, is no run). Its outcome and
training record are in the note of the commit that asked for it: the first commit synced
from there on, before the job's next change, whose note names the job (the sync writes
the run's `JobSummary`, its record included, into that commit's note). A note that
`status` would refuse is skipped with a warning, the run still shown without it.

Git runs in `source/githistory.py`, a constant number of processes whatever the length
of the history: one `git log`, the changed manifests and the notes each read in one batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from mxgitops.commands.specchange import spec_change
from mxgitops.errors import ConfigError
from mxgitops.manifests.files import MAX_FILE_SIZE, SUFFIXES
from mxgitops.manifests.yamldoc import YamlError, documents
from mxgitops.model import KUBEFLOW_KIND, NAMESPACE, SEED_KIND
from mxgitops.outputs import report
from mxgitops.outputs.summary import JobSummary
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.source import githistory
from mxgitops.source.githistory import LoggedCommit
from mxgitops.source.repository import MAX_NOTE_SIZE, Repository

log = logging.getLogger(__name__)

MOST_RUNS = 200
_KINDS = (SEED_KIND, KUBEFLOW_KIND)
Warn = Callable[[str], None]


@dataclass(frozen=True)
class Run:
    """One run of a job: the commit that changed its manifest, and what came of it."""

    commit: str  # full sha of the commit that changed the job's manifest
    author: str
    date: str  # RFC 3339, the author date
    spec_change: tuple[str, ...]  # since the previous run: "args: --lr 0.1 → 0.05"
    state: str  # the outcome its note gives ("" when no sync wrote one)
    record: TrainingRecord | None = None
    synced_commit: str = ""  # the commit whose note holds its outcome ("" if none)


class UnknownJob(ConfigError):
    """No commit of the branch defines the job asked for."""


def runs_of(
    repository: Repository,
    *,
    branch: str | None,
    notes_ref: str,
    namespace: str,
    name: str,
    most: int = MOST_RUNS,
    subpath: str = "",
    default_namespace: str = NAMESPACE,
    warn: Warn | None = None,
) -> list[Run]:
    """The runs of `namespace/name` on `branch` (None: the remote's default), newest
    first, at most `most`: the cache is brought to the remote's branch (under its lock)
    and read."""
    with repository.locked():
        tip = repository.sync(branch).commit
        return runs_at(
            repository,
            tip,
            notes_ref=notes_ref,
            namespace=namespace,
            name=name,
            most=most,
            subpath=subpath,
            default_namespace=default_namespace,
            warn=warn,
        )


def runs_at(
    repository: Repository,
    tip: str,
    *,
    notes_ref: str,
    namespace: str,
    name: str,
    most: int = MOST_RUNS,
    subpath: str = "",
    default_namespace: str = NAMESPACE,
    warn: Warn | None = None,
) -> list[Run]:
    """`runs_of` in a cache already synced (and locked by the caller), from `tip`."""
    warn = warn or log.warning
    commits = list(reversed(githistory.first_parent_log(repository, tip)))
    within = _Within(subpath)
    blobs = {c.new_blob for commit in commits for c in commit.changes if within(c.new_path)}
    texts, _ = githistory.read_blobs(repository, blobs, max_size=MAX_FILE_SIZE)
    finder = _JobFinder(texts, namespace=namespace, name=name, default=default_namespace)
    starts = _run_starts(commits, finder, within)
    notes = githistory.note_blobs(repository, notes_ref)
    synced = _synced_commits(commits, [index for index, _ in starts], notes)
    bodies, too_large = githistory.read_blobs(
        repository, (notes[sha] for sha in synced.values()), max_size=MAX_NOTE_SIZE
    )
    runs: list[Run] = []
    previous: Mapping[str, Any] | None = None
    for index, document in starts:
        commit = commits[index]
        change = spec_change(previous, document)
        previous = document
        job = None
        note_commit = synced.get(index, "")
        if note_commit:
            blob = notes[note_commit]
            job = _job_in_note(
                bodies.get(blob), blob in too_large, note_commit, namespace, name, warn
            )
        runs.append(
            Run(
                commit=commit.sha,
                author=commit.author,
                date=commit.date,
                spec_change=change,
                state=_outcome(job),
                record=job.record if job else None,
                synced_commit=note_commit if job else "",
            )
        )
    return list(reversed(runs))[:most]


def known_jobs(root: Path, subpath: str = "", default_namespace: str = NAMESPACE) -> list[str]:
    """namespace/name of every job the manifests under `root/subpath` define (no
    validation: for naming the jobs a branch has when the one asked for is not one)."""
    found: set[str] = set()
    top = root / subpath if subpath else root
    for path in sorted(top.rglob("*")):
        relative = path.relative_to(root).parts
        if path.suffix not in SUFFIXES or any(p.startswith(".") for p in relative):
            continue
        try:
            if path.stat().st_size > MAX_FILE_SIZE or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for namespace, name, _ in _jobs_in(text, default_namespace):
            found.add(f"{namespace}/{name}")
    return sorted(found)


# -- the walk ----------------------------------------------------------------------------


class _Within:
    """Whether a path of the repository is a manifest file under `subpath`."""

    def __init__(self, subpath: str) -> None:
        self._prefix = PurePosixPath(subpath.strip("/") or ".")

    def __call__(self, path: str) -> bool:
        if not path or not path.endswith(SUFFIXES):
            return False
        parts = PurePosixPath(path).parts
        if any(part.startswith(".") for part in parts):
            return False
        return str(self._prefix) == "." or PurePosixPath(path).is_relative_to(self._prefix)


class _JobFinder:
    """The job's manifest in a blob, parsed once per blob (None: not there)."""

    def __init__(
        self, texts: Mapping[str, bytes], *, namespace: str, name: str, default: str
    ) -> None:
        self._texts = texts
        self._key = (namespace, name)
        self._default = default
        self._seen: dict[str, Mapping[str, Any] | None] = {}

    def __call__(self, blob: str) -> Mapping[str, Any] | None:
        if blob not in self._seen:
            self._seen[blob] = self._find(self._texts.get(blob))
        return self._seen[blob]

    def _find(self, raw: bytes | None) -> Mapping[str, Any] | None:
        if raw is None:
            return None
        text = raw.decode("utf-8", errors="replace")
        if self._key[1] not in text:  # a manifest that does not name it cannot define it
            return None
        for namespace, name, data in _jobs_in(text, self._default):
            if (namespace, name) == self._key:
                return data
        return None


def _jobs_in(text: str, default_namespace: str) -> Iterable[tuple[str, str, Mapping[str, Any]]]:
    try:
        docs = list(documents(text))
    except YamlError:
        return []
    found = []
    for doc in docs:
        data = doc.data
        if not isinstance(data, Mapping) or data.get("kind") not in _KINDS:
            continue
        metadata = data.get("metadata")
        if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str):
            continue
        namespace = metadata.get("namespace")
        namespace = namespace if isinstance(namespace, str) and namespace else default_namespace
        found.append((namespace, metadata["name"], data))
    return found


def _run_starts(
    commits: list[LoggedCommit], finder: _JobFinder, within: Callable[[str], bool]
) -> list[tuple[int, Mapping[str, Any]]]:
    """(index of the commit, the job's manifest then) of each commit that changed it,
    oldest first. The job is followed from file to file: where it is defined after a
    commit is the changed file that defines it, else the file it was in, if untouched."""
    starts: list[tuple[int, Mapping[str, Any]]] = []
    where: str | None = None
    current: Mapping[str, Any] | None = None
    for index, commit in enumerate(commits):
        defined = [(c.new_path, finder(c.new_blob)) for c in commit.changes if within(c.new_path)]
        found = [(path, data) for path, data in defined if data is not None]
        if found:
            where, document = found[0]
            if document != current:
                starts.append((index, document))
            current = document
        elif where is not None and any(c.old_path == where for c in commit.changes):
            where, current = None, None  # its file changed, moved or went, without it
    return starts


def _synced_commits(
    commits: list[LoggedCommit], starts: list[int], notes: Mapping[str, str]
) -> dict[int, str]:
    """For each run's start, the first commit from there, before the next run, with a
    note: the commit a sync saw and wrote the run's outcome on."""
    found: dict[int, str] = {}
    for position, start in enumerate(starts):
        end = starts[position + 1] if position + 1 < len(starts) else len(commits)
        for commit in commits[start:end]:
            if commit.sha in notes:
                found[start] = commit.sha
                break
    return found


def _job_in_note(
    body: bytes | None, too_large: bool, commit: str, namespace: str, name: str, warn: Warn
) -> JobSummary | None:
    if too_large or body is None:
        warn(f"the note on {commit[:7]} is set aside: too large (over {MAX_NOTE_SIZE} bytes)")
        return None
    summary, unreadable = report.read_note(body.decode("utf-8", errors="replace"))
    if unreadable:
        warn(f"the note on {commit[:7]} is set aside: {unreadable}")
    if summary is None:
        return None
    return next((j for j in summary.jobs if (j.namespace, j.name) == (namespace, name)), None)


def _outcome(job: JobSummary | None) -> str:
    if job is None:
        return ""
    return job.state or job.action
