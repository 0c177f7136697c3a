"""`mxgitops history NAMESPACE/JOB`: the table, JSON and Markdown of a job's runs, sorted
by a metric, an unknown job's one-line error, and git's text escaped where it goes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mxgitops.cli import main
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.history import add_note, manifest, note_for, record


@pytest.fixture
def remote(make_git_remote: Callable[..., GitRemote]) -> GitRemote:
    return make_git_remote("jobs", files={"README.md": "jobs\n"})


def _history(remote: GitRemote, tmp_path: Path, *args: str) -> Result:
    base = ["history", "--repo", remote.url, "--cache-dir", str(tmp_path / "cache")]
    return CliRunner().invoke(main, [*base, *args])


def _three_runs(remote: GitRemote) -> list[str]:
    """Runs at lr 0.1, 0.05 and 0.01: best accuracy 0.8, 0.9, 0.7; loss 0.3, 0.2, 0.4."""
    commits = []
    for lr, accuracy, loss in (("0.1", 0.8, 0.3), ("0.05", 0.9, 0.2), ("0.01", 0.7, 0.4)):
        sha = remote.commit({"jobs/mnist.yaml": manifest("mnist", lr)}, f"lr {lr}")
        run = record([accuracy - 0.1, accuracy]).with_chunk(
            f"Epoch[1] Validation-cross-entropy={loss}\n"
        )
        add_note(remote, sha, note_for(sha, "mnist", run))
        commits.append(sha)
    return commits


def test_the_table_names_commits_by_short_id_with_the_spec_change_and_figures(
    remote: GitRemote, tmp_path: Path
) -> None:
    first, second, third = _three_runs(remote)

    result = _history(remote, tmp_path, "default/mnist")

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "runs of default/mnist, newest first; FINAL and BEST: validation-accuracy"
    assert lines[2].split() == [
        *(
            "COMMIT",
            "AUTHOR",
            "DATE",
            "(UTC)",
            "CHANGE",
            "OUTCOME",
            "DURATION",
            "GPU-H",
            "FINAL",
            "BEST",
        )
    ]
    rows = lines[3:]
    assert [row.split()[0] for row in rows] == [third[:7], second[:7], first[:7]]
    assert "args: --lr 0.05 → 0.01" in rows[0]
    assert "new job" in rows[2]
    assert rows[1].split()[-5:] == ["Succeeded", "30m", "0.5", "0.9", "0.9"]


def test_metric_sorts_best_first_and_lower_first_for_a_loss(
    remote: GitRemote, tmp_path: Path
) -> None:
    first, second, third = _three_runs(remote)

    by_accuracy = _history(remote, tmp_path, "default/mnist", "--metric", "accuracy", "-o", "json")
    by_loss = _history(remote, tmp_path, "default/mnist", "--metric", "Validation-cross-entropy")

    assert by_accuracy.exit_code == 0, by_accuracy.output
    shown = json.loads(by_accuracy.output)
    assert [run["commit"] for run in shown["runs"]] == [second, first, third]
    assert shown["metric"] == "validation-accuracy"  # what `accuracy` found
    rows = by_loss.output.splitlines()[3:]
    assert [row.split()[0] for row in rows] == [second[:7], first[:7], third[:7]]
    assert "best first; FINAL and BEST: validation-cross-entropy" in by_loss.output.splitlines()[0]


def test_json_carries_every_metric_and_the_run_s_figures(remote: GitRemote, tmp_path: Path) -> None:
    third = _three_runs(remote)[-1]

    result = _history(remote, tmp_path, "default/mnist", "-o", "json")

    shown = json.loads(result.output)
    assert shown["job"] == "default/mnist"
    newest = shown["runs"][0]
    assert set(newest) == {
        *("commit", "short", "author", "date", "spec_change", "outcome", "synced_commit"),
        *("started", "finished", "duration_seconds", "gpu_hours", "cpu_core_hours"),
        *("resources_estimate", "final", "best"),
    }
    assert newest["commit"] == third and newest["short"] == third[:7]
    assert newest["spec_change"] == ["args: --lr 0.05 → 0.01"]
    assert newest["final"] == {
        "train-accuracy": 0.7,
        "validation-accuracy": 0.7,
        "validation-cross-entropy": 0.4,
    }
    assert newest["best"]["validation-accuracy"] == 0.7
    assert newest["duration_seconds"] == 1800.0
    assert newest["gpu_hours"] == 0.5


def test_markdown_is_a_table_with_git_s_text_inert(
    remote: GitRemote, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Eve | `@org/admins` [x](h://e) \x1b[31m")
    sha = remote.commit({"jobs/mnist.yaml": manifest("mnist", "0.1")}, "first")
    add_note(remote, sha, note_for(sha, "mnist", record([0.5])))

    markdown = _history(remote, tmp_path, "default/mnist", "-o", "markdown")
    table = _history(remote, tmp_path, "default/mnist")

    assert markdown.exit_code == 0, markdown.output
    lines = markdown.output.splitlines()
    assert lines[0] == "**Runs of `default/mnist`** (final and best `validation-accuracy`)"
    assert lines[2].startswith("| Commit | Author | Date (UTC) | Change | Outcome |")
    row = lines[4]
    assert row.startswith(f"| `{sha[:7]}` | ``Eve \\| `@org/admins` [x](h://e) \\u001b[31m`` |")
    assert row.count(" | ") == 8  # nine cells: the author's pipe is escaped
    assert "\x1b" not in table.output and "\\u001b[31m" in table.output


def test_an_unknown_job_is_one_line_naming_the_branch_s_jobs(
    remote: GitRemote, tmp_path: Path
) -> None:
    remote.commit(
        {
            "jobs/mnist.yaml": manifest("mnist", "0.1"),
            "jobs/resnet.yaml": manifest("resnet", "0.1", namespace="vision"),
        }
    )

    result = _history(remote, tmp_path, "default/mnst")

    assert result.exit_code == 2
    assert result.output == (
        "Error: no commit of main defines the job 'default/mnst'; its tip defines "
        "default/mnist, vision/resnet; did you mean default/mnist?\n"
    )


def test_a_job_without_namespace_is_in_the_configured_one(
    remote: GitRemote, tmp_path: Path
) -> None:
    remote.commit({"jobs/mnist.yaml": manifest("mnist", "0.1", namespace="ml")})

    result = _history(remote, tmp_path, "mnist", "--namespace", "ml")

    assert result.exit_code == 0, result.output
    assert result.output.startswith("runs of ml/mnist\n")
