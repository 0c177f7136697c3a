"""`mxgitops dashboard` over HTTP, without a browser: the pages of a real repository's
notes, read-only (405), the Content-Security-Policy, paging, escaping, a forged note."""

from __future__ import annotations

import http.client
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest

from mxgitops.dashboard.server import CSP, Server
from mxgitops.outputs import report
from mxgitops.outputs.summary import JobSummary, Summary
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.dashboard import (
    FIRST_RUN,
    HOSTILE_LOG,
    HOSTILE_MESSAGE,
    SECOND_RUN,
    WAITS,
    Commits,
    serving,
    three_jobs,
)
from tests.helpers.history import NS, add_note


@pytest.fixture
def remote(make_git_remote: Callable[..., GitRemote]) -> GitRemote:
    return make_git_remote("jobs", files={"README.md": "jobs\n"})


@pytest.fixture
def commits(remote: GitRemote) -> Commits:
    return three_jobs(remote)


@pytest.fixture
def server(remote: GitRemote, commits: Commits, tmp_path: Path) -> Iterator[Server]:
    with serving(remote, tmp_path / "cache", commit_url="https://forge.test/c/{sha}") as (s, _):
        yield s


def fetch(server: Server, path: str, method: str = "GET") -> tuple[int, dict[str, str], str]:
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(str(host), port, timeout=30)
    try:
        connection.request(method, path)
        answer = connection.getresponse()
        body = answer.read().decode()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, body
    finally:
        connection.close()


class _Rows(HTMLParser):
    """The jobs table's rows: (data-job, data-state) in page order, and every tag seen."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, str]] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.append((tag, found))
        if tag == "tr" and "data-job" in found:
            self.rows.append((str(found["data-job"]), str(found["data-state"])))


def parsed(body: str) -> _Rows:
    parser = _Rows()
    parser.feed(body)
    return parser


def test_the_jobs_page_shows_the_three_jobs_what_needs_attention_first(server: Server) -> None:
    status, _, body = fetch(server, "/")
    assert status == 200
    assert parsed(body).rows == [
        (f"{NS}/broken", "Failed"),
        (f"{NS}/waiting", "Queued"),
        (f"{NS}/mnist", "Succeeded"),
    ]
    assert '<progress max="100" value="100.0"' in body  # mnist: 3 of 3 epochs
    assert '<progress max="100" value="33.3"' in body  # broken: 1 of 3 when it failed
    assert "validation-accuracy 0.7422" in body  # mnist's latest key metric, its second run


def test_filters_by_namespace_state_and_text(server: Server) -> None:
    assert parsed(fetch(server, "/?state=Queued")[2]).rows == [(f"{NS}/waiting", "Queued")]
    assert parsed(fetch(server, "/?q=mni")[2]).rows == [(f"{NS}/mnist", "Succeeded")]
    assert parsed(fetch(server, "/?namespace=elsewhere")[2]).rows == []


def test_only_get_and_head_are_answered(server: Server) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "BREW"):
        status, headers, _ = fetch(server, "/", method)
        assert (method, status, headers.get("allow")) == (method, 405, "GET, HEAD")
        assert headers["content-security-policy"] == CSP


def test_head_answers_the_headers_of_get_without_a_body(server: Server) -> None:
    status, headers, body = fetch(server, "/", "HEAD")
    assert (status, body) == (200, "")
    assert int(headers["content-length"]) == len(fetch(server, "/")[2].encode())


def test_every_answer_has_the_strict_policy_and_no_inline_script_or_style(
    server: Server, commits: Commits
) -> None:
    for path in (
        "/",
        "/jobs/default/broken",
        "/jobs/default/mnist",
        f"/commits/{commits.first}",
        "/no/such/page",
        "/healthz",
    ):
        _, headers, body = fetch(server, path)
        policy = dict(
            part.strip().split(" ", 1) for part in headers["content-security-policy"].split(";")
        )
        assert policy["default-src"] == "'none'", path
        assert policy["frame-ancestors"] == "'none'"
        assert "script-src" not in policy  # default-src 'none': no script at all
        assert policy["style-src"] == "'self'"
        assert headers["x-content-type-options"] == "nosniff"
        tags = parsed(body).tags
        assert not [t for t, _ in tags if t in ("script", "iframe", "object", "embed", "style")]
        assert not [a for _, a in tags if "style" in a or any(k.startswith("on") for k in a)]


def test_hostile_text_of_a_failure_is_escaped_text(server: Server) -> None:
    _, _, body = fetch(server, "/jobs/default/broken")
    assert "&lt;script&gt;document.title=&#39;owned&#39;&lt;/script&gt;" in body
    assert "&lt;img src=x onerror=" in body
    assert "**not bold**" in body  # markdown is not rendered either
    assert "<script" not in body and "<img" not in body
    assert "CUDA out of memory" in body
    assert HOSTILE_MESSAGE not in body and HOSTILE_LOG not in body  # only escaped


def test_the_job_page_draws_one_point_per_recorded_epoch_for_each_run(
    server: Server, commits: Commits
) -> None:
    _, _, body = fetch(server, "/jobs/default/mnist?metric=validation-accuracy")
    circles = [a for t, a in parsed(body).tags if t == "circle"]
    groups = [a["data-run"] for t, a in parsed(body).tags if t == "g" and "data-run" in a]
    assert groups == [commits.second[:7], commits.first[:7]]  # newest run first
    drawn = [(int(str(c["data-epoch"])), float(str(c["data-value"]))) for c in circles]
    expected = [
        *SECOND_RUN.log.series["validation-accuracy"].items(),
        *FIRST_RUN.log.series["validation-accuracy"].items(),
    ]
    assert drawn == expected
    assert "args: --lr 0.1 → 0.05" in body or "0.1 → 0.05" in body  # the spec change


def test_the_metric_is_chosen_from_the_list_and_an_unknown_one_is_not_drawn(
    server: Server,
) -> None:
    _, _, body = fetch(server, "/jobs/default/mnist?metric=train-cross-entropy")
    options = re.findall(r'<option value="([^"]+)"', body)
    assert options == sorted(options) and "train-cross-entropy" in options
    assert 'data-metric="train-cross-entropy"' in body
    _, _, other = fetch(server, "/jobs/default/mnist?metric=%3Cscript%3E")
    assert 'data-metric="validation-accuracy"' in other  # the key metric instead
    assert "<script" not in other


def test_waiting_and_commit_pages_say_what_the_notes_say(server: Server, commits: Commits) -> None:
    _, _, body = fetch(server, "/jobs/default/waiting")
    assert "insufficient quota for nvidia.com/gpu" in body and WAITS.startswith("Kueue")
    status, _, page = fetch(server, f"/commits/{commits.second}")
    assert status == 200
    assert "replace" in page and "spec changed" in page and "unchanged" in page
    assert f'href="https://forge.test/c/{commits.second}"' in page
    assert fetch(server, f"/commits/{'0' * 40}")[0] == 404
    assert fetch(server, "/commits/not-a-sha")[0] == 404
    assert fetch(server, "/jobs/default/nobody")[0] == 404


def test_paging_bounds_the_jobs_page(remote: GitRemote, tmp_path: Path) -> None:
    tip = remote.rev()
    jobs = tuple(
        JobSummary(NS, f"job-{n:03d}", "create", "new job", state="Running", commit=tip)
        for n in range(120)
    )
    add_note(remote, tip, report.render_note(Summary(commit=tip, instance="t", jobs=jobs)))
    with serving(remote, tmp_path / "cache") as (server, _):
        first = fetch(server, "/")[2]
        assert len(parsed(first).rows) == 50
        assert 'rel="next" href="/?page=2"' in first and 'rel="prev"' not in first
        last = parsed(fetch(server, "/?page=3")[2]).rows
        assert [job for job, _ in last] == [f"{NS}/job-{n:03d}" for n in range(100, 120)]
        assert parsed(fetch(server, "/?page=999")[2]).rows == last  # the last page
        assert len(parsed(fetch(server, "/?size=100000")[2]).rows) == 120  # at most 200
        assert fetch(server, "/?" + "&".join(f"a{n}=1" for n in range(40)))[0] == 400


def test_a_note_status_refuses_is_refused_here_too(remote: GitRemote, tmp_path: Path) -> None:
    tip = remote.rev()
    good = report.render_note(
        Summary(commit=tip, jobs=(JobSummary(NS, "mnist", "create", "new", state="Running"),))
    )
    forged = good.replace('"state":"Running"', '"state":["<b>forged</b>"]')
    assert forged != good
    add_note(remote, tip, forged)
    _, why = report.read_note(forged)
    assert why  # status sets it aside
    with serving(remote, tmp_path / "cache") as (server, _):
        status, _, body = fetch(server, "/")
        assert status == 200 and parsed(body).rows == []
        assert "is set aside" in body and "jobs[0].state" in body
        assert "<b>forged</b>" not in body


def test_the_base_path_holds_every_page(
    remote: GitRemote, commits: Commits, tmp_path: Path
) -> None:
    with serving(remote, tmp_path / "cache", base_path="/mxgitops") as (server, _):
        status, _, body = fetch(server, "/mxgitops/")
        assert status == 200 and len(parsed(body).rows) == 3
        assert 'href="/mxgitops/static/dashboard.css"' in body
        assert f'href="/mxgitops/jobs/default/{quote("mnist")}"' in body
        assert fetch(server, "/mxgitops/static/dashboard.css")[1]["content-type"].startswith(
            "text/css"
        )
        assert fetch(server, "/mxgitops")[:2][0] == 308
        assert fetch(server, "/")[0] == 404
