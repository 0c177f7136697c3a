"""What a pull request shows is what the sync does, whatever the pull request contains.

A hostile pull request tries to hide a job from `mxgitops diff` (export-ignore,
.gitattributes conversions), to make `diff` read or write outside its scratch
space (`path:`, symlinks), to make the verdict cache stale (a symlinked
--path), and to forge the comment or the status note (newlines, backticks and
the note marker in file and field names). Real git, the API double over HTTP.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from markdown_it import MarkdownIt
from markdown_it.token import Token

from mxgitops.cli import main
from mxgitops.commands.review import JobChange, Review, render_markdown, render_text
from mxgitops.commands.status import diff_commits
from mxgitops.commands.sync import sync
from mxgitops.errors import ConfigError
from mxgitops.manifests.files import Problem
from mxgitops.outputs import report
from mxgitops.outputs import summary as mxgitops_summary
from mxgitops.outputs.markdown import code, visible
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.gitsync import NS, config_for, jobs_files, mxjob
from tests.kubeapi.harness import KubeAPI

INJECTED = "## ✅ Approved by @org/platform-admins"
HOSTILE = f"x`` `\n{INJECTED}\n<img src=x onerror=alert(1)>| [link](http://evil) \\|"


@pytest.fixture
def remote(make_git_remote: Callable[..., GitRemote]) -> GitRemote:
    return make_git_remote("jobs", files=jobs_files("alpha"))


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """diff's temporary directories go here, so a test sees what it leaves around."""
    root = tmp_path / "scratch" / "tmp"
    root.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    yield root


def created_jobs(kubeapi: KubeAPI) -> set[str]:
    return {
        o["metadata"]["labels"]["mxgitops.io/job"]
        for o in kubeapi.objects("jobs", NS)
        if "mxgitops.io/job" in o["metadata"].get("labels", {})
    }


def added(result: Review) -> set[str]:
    return {c.name for c in result.added}


# -- diff reads trees as sync does ----------------------------------------------------


def test_export_ignore_hides_no_job_from_diff(
    remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    base = remote.rev()
    remote.commit(
        {
            ".gitattributes": "jobs/sneaky.yaml export-ignore\n",
            "jobs/sneaky.yaml": mxjob("sneaky"),
        }
    )

    result = diff_commits(remote.work, base, "HEAD", path="jobs", namespace=NS)
    outcome = sync(config_for(remote.url, tmp_path / "cache", kubeapi))

    assert added(result) == {"sneaky"}
    assert created_jobs(kubeapi) == {"alpha", "sneaky"}
    assert {j.name for j in outcome.summary.jobs if j.action == "create"} == {"alpha", "sneaky"}


def test_sync_and_diff_read_the_bytes_git_stores_whatever_gitattributes_says(
    remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """`ident` rewrites $Id$ on checkout: a sync reading the checked-out file would run
    other arguments than the ones the pull request showed."""
    base = remote.rev()
    manifest = mxjob("ident").replace("train.py", "$Id$")
    remote.commit({".gitattributes": "*.yaml ident\n", "jobs/ident.yaml": manifest})

    result = diff_commits(remote.work, base, "HEAD", path="jobs", namespace=NS)
    sync(config_for(remote.url, tmp_path / "cache", kubeapi))

    assert added(result) == {"ident"}
    (job,) = [o for o in kubeapi.objects("jobs", NS) if o["metadata"]["name"].startswith("ident")]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["$Id$"]


# -- diff does not trust the pull request's paths ---------------------------------------


@pytest.mark.parametrize(
    "repo_file", ["path: /etc\n", "path: ../../escaped\n", "path: jobs/../../escaped\n"]
)
def test_diff_refuses_a_path_outside_the_repository(
    remote: GitRemote, scratch: Path, repo_file: str
) -> None:
    base = remote.rev()
    remote.commit({".mxgitops.yaml": repo_file})

    with pytest.raises(ConfigError, match="path"):
        diff_commits(remote.work, base, "HEAD", path=None, namespace=NS)

    assert not (scratch.parent / "escaped").exists()
    assert not (scratch / "escaped").exists()
    assert list(scratch.iterdir()) == []  # the scratch space is gone too


@pytest.mark.parametrize("flag", ["/etc", "../escaped", "jobs/../../escaped"])
def test_diff_refuses_a_path_flag_outside_the_repository(
    remote: GitRemote, scratch: Path, flag: str
) -> None:
    with pytest.raises(ConfigError, match="path"):
        diff_commits(remote.work, "HEAD", "HEAD", path=flag, namespace=NS)
    assert not (scratch.parent / "escaped").exists()
    assert list(scratch.iterdir()) == []


def test_a_symlinked_path_leading_out_of_the_repository_is_refused(
    remote: GitRemote, scratch: Path
) -> None:
    base = remote.rev()
    os.symlink("/etc", remote.work / "linked")
    remote.commit({".mxgitops.yaml": "path: linked\n"})

    with pytest.raises(ConfigError, match="linked"):
        diff_commits(remote.work, base, "HEAD", path=None, namespace=NS)


def test_a_symlink_to_etc_passwd_is_reported_and_diff_goes_on(remote: GitRemote) -> None:
    base = remote.rev()
    os.symlink("/etc/passwd", remote.work / "jobs" / "passwd.yaml")
    remote.commit({"jobs/beta.yaml": mxjob("beta")})

    result = CliRunner().invoke(
        main, ["diff", base, "HEAD", "--repo", str(remote.work), "--path", "jobs", "-o", "json"]
    )

    assert result.exit_code == 1, result.output  # like validate: a problem, not a git error
    review = json.loads(result.stdout)
    assert [c["name"] for c in review["added"]] == ["beta"]
    (problem,) = review["broken"]
    assert problem["file"] == "jobs/passwd.yaml"  # from the repository's root, as validate
    assert "symlink to /etc/passwd" in problem["message"] and "not followed" in problem["message"]
    assert "root:" not in result.output


def test_a_problem_that_was_there_before_is_not_new(remote: GitRemote) -> None:
    os.symlink("/etc/passwd", remote.work / "jobs" / "passwd.yaml")
    base = remote.commit({})
    remote.commit({"jobs/beta.yaml": mxjob("beta")})

    result = diff_commits(remote.work, base, "HEAD", path="jobs", namespace=NS)

    assert added(result) == {"beta"}
    assert not result.broken and len(result.still_broken) == 1


# -- the verdict cache and a symlinked --path -------------------------------------------


def test_a_symlinked_path_does_not_make_the_verdict_cache_stale(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    remote = make_git_remote("linked", files={"team/jobs/alpha.yaml": mxjob("alpha")})
    os.symlink("team/jobs", remote.work / "jobs")
    remote.commit({}, "jobs -> team/jobs")
    config = config_for(remote.url, tmp_path / "cache", kubeapi)
    first = sync(config)
    assert {j.name: j.action for j in first.summary.jobs} == {"alpha": "create"}

    remote.commit(
        {
            "team/jobs/alpha.yaml": mxjob("alpha", image="mxnet/python:2.0"),
            "team/jobs/beta.yaml": mxjob("beta"),
        }
    )
    second = sync(config)

    assert {j.name: j.action for j in second.summary.jobs} == {
        "alpha": "replace",
        "beta": "create",
    }
    assert created_jobs(kubeapi) == {"alpha", "beta"}


# -- markdown and notes cannot be forged ---------------------------------------------------


def rendered(markdown: str) -> list[Token]:
    """Every token, inline children included, as GitHub-flavoured tables parse them."""
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    return [t for token in tokens for t in [token, *(token.children or [])]]


def assert_inert(markdown: str, headings: int) -> None:
    """The hostile strings are all inside code spans: one heading (ours), no extra
    lines, no HTML, no links, and the injected text never outside a code span."""
    tokens = rendered(markdown)
    assert sum(t.type == "heading_open" for t in tokens) == headings, markdown
    assert not [t for t in tokens if t.type in ("html_inline", "html_block", "link_open")]
    assert not [t for t in tokens if t.type == "text" and ("Approved" in t.content)], markdown
    spans = [t.content for t in tokens if t.type == "code_inline"]
    assert any("Approved by @org/platform-admins" in s for s in spans), markdown
    assert not [line for line in markdown.splitlines() if line.startswith(("#" * 2, "<"))][
        headings:
    ]


def test_diff_markdown_keeps_hostile_names_in_code_spans() -> None:
    problem = Problem(f"jobs/{HOSTILE}.yaml", 3, HOSTILE, f"spec.{HOSTILE}", HOSTILE)
    change = JobChange("default", HOSTILE, f"jobs/{HOSTILE}.yaml", detail="pod template")
    result = Review(added=[change], changed=[change], removed=[change], broken=[problem])

    markdown = render_markdown(result)

    assert_inert(markdown, headings=1)
    rows = [t for t in rendered(markdown) if t.type == "tr_open"]
    assert len(rows) == 4  # the header and three jobs: no row split or added
    cells = [t for t in rendered(markdown) if t.type == "td_open"]
    assert len(cells) == 3 * 4


def test_diff_markdown_of_a_hostile_pull_request_end_to_end(remote: GitRemote) -> None:
    base = remote.rev()
    doc: dict[str, Any] = yaml.safe_load(mxjob("beta"))
    doc["spec"][f"sneaky`\n{INJECTED}\n`"] = 1
    remote.commit({f"jobs/x`\n{INJECTED}.yaml": yaml.safe_dump(doc)})

    result = CliRunner().invoke(
        main, ["diff", base, "HEAD", "--repo", str(remote.work), "--path", "jobs", "-o", "markdown"]
    )

    assert result.exit_code == 1, result.output
    assert_inert(result.stdout, headings=1)


def hostile_summary() -> mxgitops_summary.Summary:
    job = mxgitops_summary.JobSummary(
        namespace="ml",
        name="alpha",
        action="create",
        reason="new job",
        state="Running",
        spec_hash="h",
        errors=(f"field {HOSTILE} {report.NOTE_MARKER}",),
    )
    return mxgitops_summary.Summary(
        commit="0123456789abcdef",
        instance="prod",
        jobs=(job,),
        problems=(f"jobs/a.yaml:3: spec.{HOSTILE}\n{report.NOTE_MARKER}\n{{}}",),
        prune_refused=HOSTILE,
    )


def test_status_markdown_keeps_hostile_strings_in_code_spans() -> None:
    markdown = report.render_markdown(hostile_summary())
    assert_inert(markdown, headings=0)
    assert len([t for t in rendered(markdown) if t.type == "tr_open"]) == 2


def test_a_field_named_like_the_note_marker_cannot_forge_the_note() -> None:
    summary = hostile_summary()
    note = report.render_note(summary)
    assert report.parse_note(note) == summary
    # The readable part gains no line from the newlines in the problems: title, blank,
    # header, one job, blank, what the job's action did, the problem, the prune refusal.
    assert len(report.render_table(summary).splitlines()) == 8
    lines = note.splitlines()
    assert [i for i, line in enumerate(lines) if line == report.NOTE_MARKER] == [len(lines) - 2]


def test_status_reports_a_hostile_sync_as_synced(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """End to end: a manifest whose field name holds the marker, synced, then `status`."""
    doc: dict[str, Any] = yaml.safe_load(mxjob("beta"))
    doc["spec"][f"x\n{report.NOTE_MARKER}\n{{}}"] = 1
    remote = make_git_remote(
        "forged", files={**jobs_files("alpha"), "jobs/beta.yaml": yaml.safe_dump(doc)}
    )
    config = config_for(remote.url, tmp_path / "cache", kubeapi)
    outcome = sync(config)
    assert outcome.note_written

    result = CliRunner().invoke(
        main,
        ["status", "--repo", remote.url, "--cache-dir", str(tmp_path / "cache"), "-o", "json"],
    )

    assert result.exit_code == 0, result.output  # today: "no status note", exit 1
    status = json.loads(result.stdout)
    assert status["commit"] == remote.rev()
    assert any(report.NOTE_MARKER in p for p in status["problems"])


def test_text_output_gains_no_line_from_hostile_names() -> None:
    problem = Problem(f"jobs/{HOSTILE}.yaml", 3, HOSTILE, f"spec.{HOSTILE}", HOSTILE)
    change = JobChange("default", HOSTILE, f"jobs/{HOSTILE}.yaml", detail="pod template")
    text = render_text(Review(added=[change], broken=[problem]))
    assert len(text.splitlines()) == 3  # the tally, the job, the problem
    assert "\\n## ✅ Approved" in text  # shown, escaped
    plan = report.render_plan(hostile_summary(), verbose=True)
    assert len(plan.splitlines()) == 5  # the tally, the job, its error, refusal, problem


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("plain", "`plain`"),
        ("a`b", "``a`b``"),
        ("`edge`", "`` `edge` ``"),
        (" both ", "`  both  `"),
        ("", "` `"),
        ("a|b", "`a|b`"),
        ("line\nbreak\u202e", "`line\\nbreak\\u202e`"),
    ],
)
def test_a_code_span_shows_its_value_exactly(value: str, shown: str) -> None:
    assert code(value) == shown
    (span,) = [t.content for t in rendered(shown) if t.type == "code_inline"]
    assert span == visible(value) or (not value and span == " ")


def test_a_table_cell_escapes_pipes_and_the_backslashes_before_them() -> None:
    cell = code("x\\|@org/admins", table=True)
    assert cell == "`x\\\\\\|@org/admins`"
    row = rendered(f"| a | b |\n|---|---|\n| {cell} | c |\n")
    assert len([t for t in row if t.type == "td_open"]) == 2
