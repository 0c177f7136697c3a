"""A note is parsed once per blob (a blob never changes): a job's page after the jobs
page parses no note again (`history.runs_at` reads through the loader's cache). In a
repository of 10,000 jobs the newest note is 16.5 MiB: parsing it again took seconds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from mxgitops.commands import history
from mxgitops.dashboard.loading import Loader
from mxgitops.outputs import report
from mxgitops.outputs.summary import Summary
from mxgitops.source.repository import Repository
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.dashboard import three_jobs
from tests.helpers.history import NOTES_REF, NS


def test_a_job_page_after_the_jobs_page_parses_no_note_again(
    make_git_remote: Callable[..., GitRemote], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = make_git_remote("jobs")
    commits = three_jobs(remote)
    parsed: Counter[str] = Counter()
    parse = report.read_note

    def counting(note: str) -> tuple[Summary | None, str]:
        summary, why = parse(note)
        parsed[summary.commit if summary is not None else why] += 1
        return summary, why

    monkeypatch.setattr(report, "read_note", counting)
    loader = Loader(
        Repository(remote.url, cache_dir=tmp_path / "c"), branch="main", notes_ref=NOTES_REF
    )
    loader.read()
    assert parsed == Counter({commits.second: 1, commits.first: 1})  # the newest, the records'
    runs, warnings = loader.runs(NS, "mnist")
    assert [run.commit for run in runs] == [commits.second, commits.first] and warnings == []
    assert runs[0].record is not None and runs[1].record is not None
    assert parsed == Counter({commits.second: 1, commits.first: 1})  # none parsed again

    # history's own reader, without a cache, parses each note it reads.
    direct = history.runs_at(
        loader.repository.reader(), commits.second, notes_ref=NOTES_REF, namespace=NS, name="mnist"
    )
    assert direct == runs
    assert parsed == Counter({commits.second: 2, commits.first: 2})
