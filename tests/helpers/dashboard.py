"""A dashboard serving a real bare repository whose notes hold three jobs, as syncs write
them: `mnist` finished twice (two commits, each run's record read from MXNet 1.9.1's own
logs in tests/data/training-logs), `broken` failed with a log tail holding `<script>`
and markdown, and `waiting` queued by Kueue. The server listens on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mxgitops.dashboard.loading import Loader
from mxgitops.dashboard.pages import Pages, Site
from mxgitops.dashboard.server import Refresher, Server
from mxgitops.outputs import report
from mxgitops.outputs.summary import JobSummary, Summary
from mxgitops.record.resources import ResourceUse
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.source.repository import Repository
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.history import NOTES_REF, NS, add_note, manifest

LOGS = Path(__file__).parent.parent / "data" / "training-logs"
HOSTILE_MESSAGE = "<script>document.title='owned'</script> **bold** [x](javascript:alert(1))"
HOSTILE_LOG = (
    "Epoch[0] Train-accuracy=0.34\n"
    "<script>document.body.dataset.owned='yes'</script>\n"
    "<img src=x onerror=\"document.body.dataset.owned='img'\">\n"
    "# Not a heading\n* not a list\n`not code` and **not bold**\n"
    "Traceback (most recent call last):\nRuntimeError: CUDA out of memory"
)
WAITS = "Kueue: couldn't assign flavors to pod set worker: insufficient quota for nvidia.com/gpu"


def run_record(log: str, *, lines: int | None = None, finished: bool = True) -> TrainingRecord:
    """The record of a run whose worker 0 printed `log` (its first `lines` lines)."""
    text = (LOGS / log).read_text()
    if lines is not None:
        text = "".join(text.splitlines(keepends=True)[:lines])
    use = ResourceUse(
        gpu_hours=0.5,
        cpu_core_hours=2.0,
        pods=1,
        estimate=False,
        started="2026-12-07T02:44:00Z",
        finished="2026-12-07T03:14:00Z" if finished else "",
    )
    return TrainingRecord(declared_epochs=3, cluster="", resources=use).with_chunk(
        text, at_end=True
    )


FIRST_RUN = run_record("mxnet-1.9.1-module-fit.log")
SECOND_RUN = run_record("mxnet-1.9.1-gluon-estimator-epoch.log")
BROKEN_RUN = run_record("mxnet-1.9.1-module-fit.log", lines=8, finished=False)


@dataclass(frozen=True)
class Commits:
    first: str  # mnist at lr 0.1 and broken
    second: str  # mnist at lr 0.05 and waiting


def three_jobs(remote: GitRemote) -> Commits:
    """The repository's commits and notes (see the module's docstring)."""
    first = remote.commit(
        {"jobs/mnist.yaml": manifest("mnist", "0.1"), "jobs/broken.yaml": manifest("broken", "1")},
        "mnist at lr 0.1; broken",
    )
    mnist = JobSummary(NS, "mnist", "create", "new job", state="Succeeded", commit=first)
    broken = JobSummary(
        NS,
        "broken",
        "create",
        "new job",
        state="Failed",
        commit=first,
        failure={
            "replica": "WORKER 0",
            "exit_code": 1,
            "reason": "Error",
            "message": HOSTILE_MESSAGE,
            "pod": "broken-worker-0",
            "container": "mxnet",
            "log": HOSTILE_LOG,
        },
        record=BROKEN_RUN,
    )
    add_note(remote, first, _note(first, (_with(mnist, FIRST_RUN), broken)))
    second = remote.commit(
        {
            "jobs/mnist.yaml": manifest("mnist", "0.05"),
            "jobs/waiting.yaml": manifest("waiting", "0.1"),
        },
        "mnist at lr 0.05; waiting",
    )
    waiting = JobSummary(
        NS, "waiting", "create", "new job", state="Queued", state_reason=WAITS, commit=second
    )
    again = JobSummary(
        NS, "mnist", "replace", "spec changed", state="Succeeded", commit=second, record=SECOND_RUN
    )
    # The sync of the second commit: broken carried (its record stays in the first note).
    carried = JobSummary(**{**broken.__dict__, "action": "unchanged", "record": None})
    add_note(remote, second, _note(second, (again, carried, waiting)))
    return Commits(first, second)


def _with(job: JobSummary, record: TrainingRecord) -> JobSummary:
    return JobSummary(**{**job.__dict__, "record": record})


def _note(commit: str, jobs: tuple[JobSummary, ...]) -> str:
    summary = Summary(
        commit=commit, instance="test", jobs=jobs, synced_at="2026-12-07T03:15:00Z", version="0.1"
    )
    return report.render_note(summary)


@contextmanager
def serving(
    remote: GitRemote, cache: Path, *, base_path: str = "", commit_url: str = ""
) -> Iterator[tuple[Server, Refresher]]:
    """A dashboard over `remote`'s main branch on a loopback port, read once before it
    answers; stopped on leaving."""
    loader = Loader(Repository(remote.url, cache_dir=cache), branch="main", notes_ref=NOTES_REF)
    refresher = Refresher(loader, interval=3600)
    refresher.refresh()
    assert refresher.ready, refresher.current().problem
    pages = Pages(refresher, Site(base_path=base_path, commit_url=commit_url))
    server = Server(("127.0.0.1", 0), pages, ready=lambda: refresher.ready)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, refresher
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
