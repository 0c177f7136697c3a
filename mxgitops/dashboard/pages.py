"""The dashboard's pages: a path and its query in, a status and HTML out.

Three pages, each at a stable URL under the base path: the jobs (`/`, filtered and
paged by its query), a job (`/jobs/NAMESPACE/NAME`: its runs across commits, their
curves, its progress, failure and log tail) and a commit (`/commits/SHA`: what the
sync of that commit did). The templates are Jinja2's with autoescaping on for every
one of them: whatever a note says is text on the page. Nothing here does I/O but
through the `Source` it is given (the loader, or a test's).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import quote, urlencode

import jinja2

from mxgitops.commands.history import Run
from mxgitops.dashboard import charts
from mxgitops.dashboard.loading import CommitView
from mxgitops.dashboard.snapshot import (
    MAX_LOG,
    MAX_QUERY,
    JobRow,
    Query,
    Snapshot,
    age,
    clean,
    duration,
    select,
)
from mxgitops.objects import FULL_COMMIT_ID
from mxgitops.record.runrecord import TrainingRecord

MAX_NAME = 253  # a Kubernetes name's length at most: longer path segments are no job's
_COMMIT = re.compile(r"[0-9a-f]{40}")


class Source(Protocol):
    """What the pages read: the last snapshot, and a job's runs or a commit on demand."""

    def current(self) -> Snapshot: ...

    def runs(self, namespace: str, name: str) -> tuple[list[Run], list[str]]: ...

    def commit(self, sha: str) -> CommitView: ...


@dataclass(frozen=True)
class Answer:
    status: int
    body: str


@dataclass(frozen=True)
class Site:
    """How links are made: the base path, and the forge's commit URL (`{sha}` in it)."""

    base_path: str = ""
    commit_url: str = ""

    def url(self, path: str, **params: Any) -> str:
        query = {k: v for k, v in params.items() if v not in ("", None)}
        return self.base_path + path + (f"?{urlencode(query)}" if query else "")

    def job_url(self, namespace: str, name: str, **params: Any) -> str:
        return self.url(f"/jobs/{quote(namespace, safe='')}/{quote(name, safe='')}", **params)

    def commit_page(self, sha: str) -> str:
        return self.url(f"/commits/{quote(sha, safe='')}")

    def forge_commit(self, sha: str) -> str:
        if not self.commit_url or not FULL_COMMIT_ID.fullmatch(sha):
            return ""
        return self.commit_url.replace("{sha}", sha)


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mxgitops.dashboard", "templates"),
        autoescape=True,  # every template, whatever its name: nothing from a note is markup
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        clean=clean,
        short=lambda sha: str(sha)[:7],
        duration=lambda seconds: "" if seconds is None else duration(float(seconds)),
        number=lambda value: f"{value:.4g}",
    )
    return env


class Pages:
    def __init__(
        self,
        source: Source,
        site: Site,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.source, self.site, self._now = source, site, now
        self._env = environment()

    def answer(self, path: str, params: Mapping[str, Sequence[str]]) -> Answer:
        """The page at `path` (under the base path, which the caller took off)."""
        parts = path.split("/")[1:]
        if path in ("/", ""):
            return self._jobs(Query.of(params))
        if len(parts) == 3 and parts[0] == "jobs" and all(0 < len(p) <= MAX_NAME for p in parts):
            return self._job(parts[1], parts[2], params)
        if len(parts) == 2 and parts[0] == "commits" and _COMMIT.fullmatch(parts[1]):
            return self._commit(parts[1])
        return self._render(404, "missing.html", what=clean(path, MAX_QUERY))

    def _render(self, status: int, template: str, **context: Any) -> Answer:
        snap = self.source.current()
        now = self._now()
        body = self._env.get_template(template).render(
            site=self.site,
            snap=snap,
            now=now,
            age=lambda stamp: age(stamp, now),
            **context,
        )
        return Answer(status, body)

    def _jobs(self, query: Query) -> Answer:
        page = select(self.source.current().rows, query)
        return self._render(200, "jobs.html", query=query, page=page)

    def _job(self, namespace: str, name: str, params: Mapping[str, Sequence[str]]) -> Answer:
        row = self.source.current().by_key.get((namespace, name))
        runs, warnings = self.source.runs(namespace, name)
        if row is None and not runs:
            return self._render(404, "missing.html", what=clean(f"job {namespace}/{name}"))
        records = _records(row, runs)
        metrics = sorted({metric for _, record in records for metric in record.log.series})
        wanted = (params.get("metric") or [""])[0][:MAX_QUERY]
        metric = wanted if wanted in metrics else _default_metric(metrics, row)
        curves = charts.chart(
            metric,
            [(label[:7], record.log.series.get(metric, {})) for label, record in records],
        )
        failure = row.failure if row is not None else None
        return self._render(
            200,
            "job.html",
            namespace=clean(namespace),
            name=clean(name),
            row=row,
            runs=runs,
            warnings=warnings,
            metrics=metrics,
            metric=metric,
            curves=curves,
            failure=failure,
            log_tail=clean(failure.log[-MAX_LOG:], MAX_LOG) if failure else "",
        )

    def _commit(self, sha: str) -> Answer:
        view = self.source.commit(sha)
        if not view.noted and not view.on_branch:
            return self._render(404, "missing.html", what=f"commit {sha}")
        return self._render(200, "commit.html", view=view)


def _records(row: JobRow | None, runs: list[Run]) -> list[tuple[str, TrainingRecord]]:
    """The records to draw, newest run first: each run's, and the live row's run's where
    the runs do not have it yet (its note is newer than the last history read)."""
    found = [(run.commit, run.record) for run in runs if run.record is not None]
    if row is not None and row.record is not None:
        commits = {sha for run in runs if run.record for sha in (run.commit, run.synced_commit)}
        if row.job.commit not in commits:
            found.insert(0, (row.job.commit or "current", row.record))
    return found


def _default_metric(metrics: list[str], row: JobRow | None) -> str:
    if row is not None and (key := row.key_metric()) and key[0] in metrics:
        return key[0]
    return metrics[0] if metrics else ""
