"""The pull request's plan (`mxgitops diff`) tells, for each changed job that ran
before, what its last run reached, its duration, GPU-hours and commit: from the status
notes of BASE's history in the checkout."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.commands.review import LastRun
from mxgitops.commands.status import diff_commits
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.history import add_note, manifest, note_for, record


@pytest.fixture
def remote(make_git_remote: Callable[..., GitRemote]) -> GitRemote:
    return make_git_remote("jobs", files={"README.md": "jobs\n"})


def _pull_request(remote: GitRemote) -> tuple[str, str, str]:
    """BASE with mnist run twice (the last reached 0.9 in 2 h) and resnet never synced;
    HEAD changing both. (first run, base, head)."""
    first = remote.commit(
        {"jobs/mnist.yaml": manifest("mnist", "0.1"), "jobs/resnet.yaml": manifest("resnet", "1")}
    )
    add_note(remote, first, note_for(first, "mnist", record([0.5])))
    base = remote.commit({"jobs/mnist.yaml": manifest("mnist", "0.05")}, "lower lr")
    add_note(remote, base, note_for(base, "mnist", record([0.8, 0.9], hours=2.0, gpus=2.0)))
    head = remote.commit(
        {"jobs/mnist.yaml": manifest("mnist", "0.01"), "jobs/resnet.yaml": manifest("resnet", "2")},
        "pull request",
    )
    return first, base, head


def test_a_changed_job_s_last_run_is_told(remote: GitRemote) -> None:
    _, base, head = _pull_request(remote)

    result = diff_commits(remote.work, base, head, path="jobs", namespace=None)

    assert [c.name for c in result.changed] == ["mnist", "resnet"]
    assert result.last_runs == (
        LastRun(
            job="default/mnist",
            commit=base,
            outcome="Succeeded",
            metric="validation-accuracy",
            final=0.9,
            duration_seconds=7200.0,
            gpu_hours=4.0,
        ),
    )
    assert result.last_runs[0].describe() == (
        f"default/mnist: its last run ({base[:7]}, Succeeded) reached validation-accuracy "
        "0.9 in 2h00m, 4 GPU-hours"
    )


def test_the_plan_comment_and_its_json_carry_the_line(remote: GitRemote) -> None:
    _, base, head = _pull_request(remote)
    args = ["diff", "--repo", str(remote.work), "--path", "jobs", base, head]

    markdown = CliRunner().invoke(main, [*args, "-o", "markdown"])
    shown = json.loads(CliRunner().invoke(main, [*args, "-o", "json"]).output)

    assert markdown.exit_code == 0, markdown.output
    assert (
        "Earlier runs of the jobs it changes:\n\n"
        f"- `default/mnist: its last run ({base[:7]}, Succeeded) reached "
        "validation-accuracy 0.9 in 2h00m, 4 GPU-hours`\n"
    ) in markdown.output
    assert shown["last_runs"] == [
        {
            "job": "default/mnist",
            "commit": base,
            "outcome": "Succeeded",
            "metric": "validation-accuracy",
            "final": 0.9,
            "duration_seconds": 7200.0,
            "gpu_hours": 4.0,
            "gpu_hours_estimate": False,
        }
    ]


def test_no_notes_no_line(remote: GitRemote, tmp_path: Path) -> None:
    """Another notes ref (a clone that fetched none): the plan as before."""
    _, base, head = _pull_request(remote)

    result = diff_commits(
        remote.work, base, head, path="jobs", namespace=None, notes_ref="refs/notes/other"
    )

    assert result.last_runs == ()
    assert [c.name for c in result.changed] == ["mnist", "resnet"]
