"""`history.runs_of`: the runs of a job across its branch, read from real git (a bare
remote, its notes pushed as a sync pushes them) through the cache clone status reads."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from mxgitops.commands.history import runs_of
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.history import NOTES_REF, NS, add_note, manifest, note_for, record
from tests.helpers.history import repository_of as open_repository


@pytest.fixture
def remote(make_git_remote: Callable[..., GitRemote]) -> GitRemote:
    return make_git_remote("jobs", files={"README.md": "jobs\n"})


def _runs(remote: GitRemote, tmp_path: Path, name: str = "mnist", **kwargs: object) -> list:
    repository = open_repository(remote, tmp_path / "cache")
    return runs_of(
        repository,
        branch="main",
        notes_ref=NOTES_REF,
        namespace=NS,
        name=name,
        **kwargs,  # type: ignore[arg-type]
    )


def test_two_commits_changing_the_learning_rate_are_two_runs_with_their_records(
    remote: GitRemote, tmp_path: Path
) -> None:
    first = remote.commit({"jobs/mnist.yaml": manifest("mnist", "0.1")}, "mnist at lr 0.1")
    add_note(remote, first, note_for(first, "mnist", record([0.5, 0.7, 0.8])))
    unrelated = remote.commit({"README.md": "more\n"}, "docs")
    second = remote.commit({"jobs/mnist.yaml": manifest("mnist", "0.05")}, "lower lr")
    add_note(remote, second, note_for(second, "mnist", record([0.6, 0.9, 0.85], hours=1.0)))

    runs = _runs(remote, tmp_path)

    assert [run.commit for run in runs] == [second, first]
    assert unrelated not in {run.commit for run in runs}
    assert runs[0].spec_change == ("args: --lr 0.1 → 0.05",)
    assert runs[1].spec_change == ("new job",)
    assert [run.state for run in runs] == ["Succeeded", "Succeeded"]
    newer, older = (run.record for run in runs)
    assert newer is not None and older is not None
    assert newer.log.latest["validation-accuracy"] == 0.85
    assert newer.log.best["validation-accuracy"] == 0.9
    assert older.log.latest["validation-accuracy"] == 0.8
    assert newer.resources is not None and newer.resources.gpu_hours == 1.0
    assert runs[0].author == "Test Author"
    assert runs[0].date.startswith("20")


def test_the_run_is_read_from_the_first_synced_commit_after_the_change(
    remote: GitRemote, tmp_path: Path
) -> None:
    """The sync saw a later tip (two commits pushed at once): the record is on its note."""
    change = remote.commit({"jobs/mnist.yaml": manifest("mnist", "0.1")}, "mnist")
    tip = remote.commit({"README.md": "pushed with it\n"}, "docs")
    add_note(remote, tip, note_for(tip, "mnist", record([0.4]), state="Failed"))

    (run,) = _runs(remote, tmp_path)

    assert run.commit == change
    assert run.synced_commit == tip
    assert run.state == "Failed"
    assert run.record is not None and run.record.log.latest["validation-accuracy"] == 0.4


def test_the_outcome_is_the_latest_note_s_state_of_the_same_run(
    remote: GitRemote, tmp_path: Path
) -> None:
    change = remote.commit({"jobs/mnist.yaml": manifest("mnist", "0.1")}, "mnist")
    add_note(remote, change, note_for(change, "mnist", record([0.4]), state="Running"))
    later = remote.commit({"README.md": "later\n"}, "docs")
    add_note(remote, later, note_for(later, "mnist", record([0.4, 0.6]), state="Succeeded"))

    (run,) = _runs(remote, tmp_path)

    assert run.synced_commit == change
    assert run.state == "Succeeded"
    assert run.record is not None and run.record.log.latest["validation-accuracy"] == 0.4

    # A latest note of another runtime of the job says nothing of this run.
    other = remote.commit({"README.md": "again\n"}, "docs again")
    add_note(remote, other, note_for(other, "mnist", None, "Failed", runtime_id="r2"))
    (run,) = _runs(remote, tmp_path)
    assert run.state == "Running"


def test_a_forged_note_is_refused_with_a_warning_and_the_other_runs_shown(
    remote: GitRemote, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = remote.commit({"jobs/mnist.yaml": manifest("mnist", "0.1")}, "first")
    add_note(remote, first, note_for(first, "mnist", record([0.5])))
    second = remote.commit({"jobs/mnist.yaml": manifest("mnist", "0.2")}, "second")
    honest = note_for(second, "mnist", record([0.9]))
    forged = re.sub(r'"gpu_hours": ?0\.5', '"gpu_hours":"lots"', honest)
    assert forged != honest
    add_note(remote, second, forged)
    warnings: list[str] = []

    runs = _runs(remote, tmp_path, warn=warnings.append)

    assert [run.commit for run in runs] == [second, first]
    assert runs[0].record is None and runs[0].state == ""
    assert runs[1].record is not None
    assert len(warnings) == 1
    assert warnings[0].startswith(f"the note on {second[:7]} is set aside: ill-typed")


def test_a_renamed_manifest_is_the_same_job_and_a_move_changes_no_run(
    remote: GitRemote, tmp_path: Path
) -> None:
    first = remote.commit({"jobs/mnist.yaml": manifest("mnist", "0.1")}, "first")
    (remote.work / "jobs" / "vision").mkdir()
    remote.git("mv", "jobs/mnist.yaml", "jobs/vision/mnist-train.yaml")
    remote.git("commit", "--quiet", "-m", "move")
    remote.push()
    moved = remote.rev()
    renamed_and_changed = remote.commit(
        {"jobs/vision/mnist-train.yaml": manifest("mnist", "0.01")}, "lower lr"
    )
    # The job leaves its file for a file that also defines another job.
    both = manifest("other", "0.3") + "---\n" + manifest("mnist", "0.001")
    last = remote.commit({"jobs/vision/mnist-train.yaml": None, "jobs/all.yaml": both}, "merge")

    runs = _runs(remote, tmp_path)

    assert [run.commit for run in runs] == [last, renamed_and_changed, first]
    assert moved not in {run.commit for run in runs}
    assert runs[0].spec_change == ("args: --lr 0.01 → 0.001",)
    assert runs[1].spec_change == ("args: --lr 0.1 → 0.01",)


def test_another_namespace_and_most(remote: GitRemote, tmp_path: Path) -> None:
    for lr in ("0.1", "0.2", "0.3"):
        remote.commit({"jobs/mnist.yaml": manifest("mnist", lr)}, f"lr {lr}")
    remote.commit({"jobs/team.yaml": manifest("mnist", "9", namespace="team")}, "team's")

    assert len(_runs(remote, tmp_path)) == 3
    assert [r.spec_change for r in _runs(remote, tmp_path, most=1)] == [("args: --lr 0.2 → 0.3",)]
    repository = open_repository(remote, tmp_path / "cache")
    team = runs_of(repository, branch="main", notes_ref=NOTES_REF, namespace="team", name="mnist")
    assert [run.spec_change for run in team] == [("new job",)]
    assert _runs(remote, tmp_path, name="absent") == []


def test_warnings_go_to_the_log_by_default(
    remote: GitRemote, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    commit = remote.commit({"jobs/mnist.yaml": manifest("mnist", "0.1")}, "first")
    add_note(remote, commit, note_for(commit, "mnist", None)[:-2] + "\n")  # no closing brace
    with caplog.at_level(logging.WARNING):
        (run,) = _runs(remote, tmp_path)
    assert run.record is None
    assert f"the note on {commit[:7]} is set aside: ill-typed: not valid JSON" in caplog.text
