"""Every run of one job across its branch's history: `mxgitops history NAMESPACE/JOB`.

A run starts where a commit of the tracked branch changed the job's manifest (wherever
the job is defined then: a renamed file, or a job moved to another file, is the same job;
a change the YAML parser sees no difference in, a comment, is no run). Its training
record is in the note of the commit that asked for it: the first commit synced from there
on, before the job's next change, whose note names the job (the sync keeps the run's
`JobSummary`, its record included, in that commit's note). Its outcome is the state the
last note of its commits gives the same runtime (later syncs saw it finish). A note that
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

from mxgitops.commands.review import LastRun
from mxgitops.commands.specchange import spec_changes
from mxgitops.commands.sync import repository_kind
from mxgitops.errors import ConfigError
from mxgitops.manifests.files import MAX_FILE_SIZE, SUFFIXES
from mxgitops.manifests.yamldoc import YamlError, documents
from mxgitops.model import KUBEFLOW_KIND, NAMESPACE, SEED_KIND
from mxgitops.outputs import report
from mxgitops.outputs.markdown import visible
from mxgitops.outputs.summary import JobSummary
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.settings import config as settings
from mxgitops.settings import reading
from mxgitops.settings.config import SyncConfig
from mxgitops.source import githistory
from mxgitops.source.gitcommand import Runner
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
    synced_commit: str = ""  # the commit that asked for it: its note holds the record


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
            repository.reader(),
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
    git: Runner,
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
    """`runs_of` from `tip` in `git`: a cache already synced (and locked by the caller),
    or a checkout (`gitcommand.local_git`)."""
    warn = warn or log.warning
    commits = list(reversed(githistory.first_parent_log(git, tip)))
    within = _Within(subpath)
    blobs = {c.new_blob for commit in commits for c in commit.changes if within(c.new_path)}
    texts, _ = githistory.read_blobs(git, blobs, max_size=MAX_FILE_SIZE)
    finder = _JobFinder(texts, namespace=namespace, name=name, default=default_namespace)
    spans = _spans(commits, finder, within)
    notes = githistory.note_blobs(git, notes_ref)
    noted = [_noted(commits[span.start : span.end], notes) for span in spans]
    bodies, too_large = githistory.read_blobs(
        git, (notes[sha] for pair in noted for sha in pair), max_size=MAX_NOTE_SIZE
    )
    reader = _NoteReader(notes, bodies, too_large, (namespace, name), warn)
    runs: list[Run] = []
    changes = spec_changes([span.document for span in spans])
    for span, pair, change in zip(spans, noted, changes, strict=True):
        commit = commits[span.start]
        asked, latest = pair or ("", "")
        asking = reader.job(asked, runtime_id=None) if asked else None
        now = reader.job(latest, runtime_id=asking.runtime_id) if asking and latest else None
        runs.append(
            Run(
                commit=commit.sha,
                author=commit.author,
                date=commit.date,
                spec_change=change,
                state=_outcome(now if now is not None and now.state else asking),
                record=asking.record if asking else None,
                synced_commit=asked if asking else "",
            )
        )
    return list(reversed(runs))[:most]


def known_jobs(directory: Path, default_namespace: str = NAMESPACE) -> list[str]:
    """namespace/name of every job the manifests under `directory` define (no validation:
    for naming the jobs a branch has when the one asked for is not one)."""
    found: set[str] = set()
    for path in sorted(directory.rglob("*")):
        hidden = any(part.startswith(".") for part in path.relative_to(directory).parts)
        if hidden or path.suffix not in SUFFIXES or path.is_symlink() or not path.is_file():
            continue
        try:
            if path.stat().st_size > MAX_FILE_SIZE:
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


@dataclass(frozen=True)
class _Span:
    """The commits [start, end) of one run: from the commit that changed the job's
    manifest to the next that changed it or took it away."""

    start: int
    end: int
    document: Mapping[str, Any]  # the job's manifest in the run


def _spans(
    commits: list[LoggedCommit], finder: _JobFinder, within: Callable[[str], bool]
) -> list[_Span]:
    """The runs' spans, oldest first. The job is followed from file to file: where it is
    defined after a commit is the changed file that defines it, else the file it was in,
    if that file was not changed."""
    spans: list[_Span] = []
    where: str | None = None
    current: Mapping[str, Any] | None = None

    def close(index: int) -> None:
        if spans and spans[-1].end == len(commits):
            spans[-1] = _Span(spans[-1].start, index, spans[-1].document)

    for index, commit in enumerate(commits):
        defined = [(c.new_path, finder(c.new_blob)) for c in commit.changes if within(c.new_path)]
        found = [(path, data) for path, data in defined if data is not None]
        if found:
            where, document = found[0]
            if document != current:
                close(index)
                spans.append(_Span(index, len(commits), document))
            current = document
        elif where is not None and any(c.old_path == where for c in commit.changes):
            close(index)
            where, current = None, None  # its file changed, moved or went, without it
    return spans


def _noted(commits: list[LoggedCommit], notes: Mapping[str, str]) -> tuple[str, ...]:
    """Of a run's commits, the first with a note (the commit a sync saw and asked for the
    run on: its note keeps the record) and the last (the run's latest state): () if none."""
    with_notes = [commit.sha for commit in commits if commit.sha in notes]
    return (with_notes[0], with_notes[-1]) if with_notes else ()


class _NoteReader:
    """The job's summary in the notes read, each note parsed once; a note status would
    refuse is set aside with one warning."""

    def __init__(
        self,
        notes: Mapping[str, str],
        bodies: Mapping[str, bytes],
        too_large: frozenset[str],
        key: tuple[str, str],
        warn: Warn,
    ) -> None:
        self._notes, self._bodies, self._too_large = notes, bodies, too_large
        self._key = key
        self._warn = warn
        self._read: dict[str, tuple[JobSummary, ...]] = {}

    def job(self, commit: str, *, runtime_id: str | None) -> JobSummary | None:
        """The job's summary in `commit`'s note (of that runtime, unless None)."""
        if commit not in self._read:
            self._read[commit] = self._jobs(commit)
        return next(
            (
                job
                for job in self._read[commit]
                if (job.namespace, job.name) == self._key
                and (runtime_id is None or job.runtime_id == runtime_id)
            ),
            None,
        )

    def _jobs(self, commit: str) -> tuple[JobSummary, ...]:
        blob = self._notes[commit]
        body = self._bodies.get(blob)
        if blob in self._too_large or body is None:
            self._warn(
                f"the note on {commit[:7]} is set aside: too large (over {MAX_NOTE_SIZE} bytes)"
            )
            return ()
        summary, unreadable = report.read_note(body.decode("utf-8", errors="replace"))
        if unreadable:
            self._warn(f"the note on {commit[:7]} is set aside: {unreadable}")
        return summary.jobs if summary is not None else ()


def _outcome(job: JobSummary | None) -> str:
    if job is None:
        return ""
    return job.state or job.action


# -- the command ---------------------------------------------------------------------------


MAX_NAMED = 12  # jobs named when the one asked for is not one


def history(
    config: SyncConfig,
    job: str,
    *,
    explicit: frozenset[str] = frozenset(),
    most: int = MOST_RUNS,
    warn: Warn | None = None,
) -> tuple[str, list[Run]]:
    """`job` (`NAMESPACE/NAME`, or `NAME` in the configured namespace) as NAMESPACE/NAME,
    and its runs on the configured branch of the configured repository; `UnknownJob`
    when no commit walked defines it, naming the jobs the branch's tip has. The path and
    namespace the tip's .mxgitops.yaml sets count where `explicit` (the settings given)
    does not name them."""
    given, _, name = job.rpartition("/")
    if not name or "/" in given:
        raise ConfigError(f"{visible(job[:200])!r} is not NAMESPACE/JOB")
    if repository_kind(config.repo) == "directory":
        raise ConfigError(
            f"--repo {config.repo} is a plain directory; a job's runs live in a Git repository"
        )
    repository = reading.repository_of(config)
    with repository.locked():
        checkout = repository.sync(config.ref)
        config, _ = settings.apply_repo_settings(config, set(explicit), checkout.root)
        namespace = given or config.namespace
        runs = runs_at(
            repository.reader(),
            checkout.commit,
            notes_ref=config.notes_ref,
            namespace=namespace,
            name=name,
            most=most,
            subpath=config.path,
            default_namespace=config.namespace,
            warn=warn,
        )
        if not runs:
            raise UnknownJob(
                _unknown(
                    namespace,
                    name,
                    checkout.ref,
                    known_jobs(reading.manifest_dir(checkout.root, config.path), config.namespace),
                )
            )
    return f"{namespace}/{name}", runs


def _unknown(namespace: str, name: str, ref: str, known: list[str]) -> str:
    from difflib import get_close_matches  # only a job not found needs it

    wanted = f"{namespace}/{name}"
    message = f"no commit of {visible(ref)} defines the job {visible(wanted[:200])!r}"
    if not known:
        return message + "; its tip defines no job"
    named = ", ".join(visible(job) for job in known[:MAX_NAMED])
    more = f" and {len(known) - MAX_NAMED} more" if len(known) > MAX_NAMED else ""
    close = get_close_matches(wanted, known, n=1)
    hint = f"; did you mean {visible(close[0])}?" if close else ""
    return f"{message}; its tip defines {named}{more}{hint}"


# -- the pull request's plan ---------------------------------------------------------------


MAX_LAST_RUNS = 20  # changed jobs of one pull request whose history is read


def last_runs(
    git: Runner,
    base: str,
    jobs: Iterable[tuple[str, str]],
    *,
    notes_ref: str,
    default_namespace: str = NAMESPACE,
) -> tuple[LastRun, ...]:
    """For each of `jobs` (namespace, name; the first `MAX_LAST_RUNS`), what its newest
    run with a record in `base`'s history reached; jobs that never ran are left out."""
    found = []
    for namespace, name in list(jobs)[:MAX_LAST_RUNS]:
        runs = runs_at(
            git,
            base,
            notes_ref=notes_ref,
            namespace=namespace,
            name=name,
            default_namespace=default_namespace,
        )
        ran = next((run for run in runs if run.record is not None), None)
        if ran is None or ran.record is None:
            continue
        record = ran.record
        metric = key_metric(record)
        use = record.resources
        found.append(
            LastRun(
                job=f"{namespace}/{name}",
                commit=ran.commit,
                outcome=ran.state,
                metric=metric,
                final=record.log.latest.get(metric) if metric else None,
                duration_seconds=record.duration_seconds,
                gpu_hours=use.gpu_hours if use else None,
                estimate=use.estimate if use else False,
            )
        )
    return tuple(found)


def key_metric(record: TrainingRecord) -> str:
    """Its first validation metric, else its first metric, as `status` shows one."""
    names = sorted(record.log.latest, key=lambda n: (not n.startswith("validation-"), n))
    return names[0] if names else ""
