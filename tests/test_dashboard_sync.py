"""The dashboard fed by real syncs (`commands.sync.sync`) against the API double and the
real control plane: the jobs their notes name, the runs a changed manifest makes, what
the sync of a commit did; a refresh picks up the next sync's note, and a refresh that
fails keeps the last page, saying why."""

from __future__ import annotations

import http.client
import shutil
import time
from pathlib import Path

from mxgitops.commands.sync import sync
from mxgitops.dashboard.server import Server
from mxgitops.outputs import report
from mxgitops.outputs.summary import JobSummary, Summary
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.dashboard import serving
from tests.helpers.history import add_note
from tests.helpers.sync_git_e2e import NS, config_for, mxjob, note_summary, remote
from tests.kubeapi.harness import KubeAPI

__all__ = ["remote"]  # the fixture of tests/helpers/sync_git_e2e.py: alpha, beta, gamma


def page(server: Server, path: str) -> tuple[int, str]:
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(str(host), port, timeout=30)
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        return answer.status, answer.read().decode()
    finally:
        connection.close()


def rows(body: str) -> list[str]:
    return [part.split('"', 1)[0] for part in body.split('data-job="')[1:]]


def test_the_pages_show_what_the_syncs_wrote(
    remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    config = config_for(remote.url, tmp_path / "cache", kubeapi)
    assert sync(config).note_written
    first = remote.rev()
    states = {job.name: job.state or job.action for job in note_summary(remote, first).jobs}
    with serving(remote, tmp_path / "dashboard-cache") as (server, refresher):
        status, body = page(server, "/")
        assert status == 200
        assert sorted(rows(body)) == [f"{NS}/alpha", f"{NS}/beta", f"{NS}/gamma"]
        for name, state in states.items():
            assert f'data-job="{NS}/{name}" data-state="{state}"' in body
        second = remote.commit(
            {"jobs/beta.yaml": mxjob("beta", image="mxnet/python:1.9.1_gpu")}, "beta on GPU"
        )
        assert sync(config).note_written
        refresher.refresh()
        assert refresher.current().tip == second == refresher.current().note_commit
        _, beta = page(server, f"/jobs/{NS}/beta")
        assert beta.index(f"/commits/{second}") < beta.index(f"/commits/{first}")  # newest first
        assert "mxnet/python:1.9.1_gpu" in beta  # its spec change since the run before
        _, commit = page(server, f"/commits/{second}")
        assert "replace" in commit and f"{NS}/beta" in commit


def test_the_refresh_thread_picks_up_the_next_note(
    remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    config = config_for(remote.url, tmp_path / "cache", kubeapi)
    assert sync(config).note_written
    with serving(remote, tmp_path / "dashboard-cache") as (_, refresher):
        refresher.interval = 0.2
        refresher.start()
        try:
            second = remote.commit({"jobs/gamma.yaml": None}, "gamma goes")
            assert sync(config).note_written
            deadline = time.monotonic() + 60
            while refresher.current().note_commit != second:
                assert time.monotonic() < deadline, "the new note was not read within 60 s"
                time.sleep(0.05)
            gamma = refresher.current().by_key[(NS, "gamma")]
            assert gamma.job.action == "delete"
        finally:
            refresher.stop()


def test_a_failed_refresh_keeps_the_last_page_and_says_why(
    remote: GitRemote, tmp_path: Path
) -> None:
    tip = remote.rev()  # no sync: the note written as one writes it
    add_note(
        remote,
        tip,
        report.render_note(
            Summary(commit=tip, jobs=(JobSummary(NS, "alpha", "create", "new", state="Running"),))
        ),
    )
    with serving(remote, tmp_path / "dashboard-cache") as (server, refresher):
        shutil.move(remote.bare, tmp_path / "gone.git")
        refresher.refresh()
        assert refresher.ready and refresher.current().problem
        status, body = page(server, "/")
        assert status == 200 and rows(body) == [f"{NS}/alpha"]
        assert "The last refresh failed" in body
