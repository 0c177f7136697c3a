"""The pull request's plan says what the changed jobs' earlier runs reached: a CI
checkout has no notes, so the plan job fetches the sync's notes first (`--notes-from`,
their newest commit only, within a deadline), and a fetch that fails leaves the plan
as it was. Run as the GitHub workflow's step runs it: bash, the base branch's clone
beside the pull request's."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.gitrepos.fixtures import GitRemote
from tests.helpers.cronjob import EXAMPLE
from tests.helpers.history import add_note, manifest, note_for, record


def base_files() -> dict[str, str]:
    """The base branch: a job and the example's script, which the workflow runs from it."""
    script = (EXAMPLE / "ci/pr-plan.py").read_text()
    return {"jobs/mnist.yaml": manifest("mnist", "0.1"), "ci/pr-plan.py": script}


def checkouts(remote: GitRemote, at: Path) -> tuple[str, Path]:
    """The base commit and the pull request's checkout, cloned as CI clones: no notes."""
    trusted, pr = at / "trusted", at / "pr"
    for clone in (trusted, pr):
        subprocess.run(["git", "clone", "--quiet", remote.url, str(clone)], check=True)
    base = git(trusted, "rev-parse", "HEAD")
    (pr / "jobs/mnist.yaml").write_text(manifest("mnist", "0.01"))
    git(pr, "commit", "--quiet", "-am", "a lower learning rate")
    assert git(pr, "notes", "--ref=refs/notes/mxgitops", "list") == ""
    return base, pr


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def plan_step(pr: Path, base: str, notes_from: str) -> subprocess.CompletedProcess[str]:
    """The workflow's plan step, neither installing (the test's mxgitops stands in) nor
    posting (test_pr_plan.py posts)."""
    github = yaml.safe_load((EXAMPLE / ".github/workflows/mxgitops.yml").read_text())
    (step,) = [s for s in github["jobs"]["plan"]["steps"] if "run" in s]
    assert "NOTES_FROM" in step["env"]
    commands = step["run"].replace(" --install", "").replace(" --post github", "")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(pr.parent),
        "BASE_SHA": base,
        "NOTES_FROM": notes_from,
        "MXGITOPS_COMMAND": str(Path(sys.executable).parent / "mxgitops"),
    }
    return subprocess.run(
        ["bash", "-e", "-c", commands], cwd=pr, env=env, capture_output=True, text=True,
        timeout=180, check=False,
    )  # fmt: skip


def test_the_plan_says_what_the_changed_job_s_last_run_reached(
    make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files=base_files())
    ran = remote.rev()
    add_note(remote, ran, note_for(ran, "mnist", record([0.8, 0.9], hours=2.0, gpus=2.0)))
    base, pr = checkouts(remote, tmp_path)

    done = plan_step(pr, base, remote.url)

    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        f"default/mnist: its last run ({ran[:7]}, Succeeded) reached validation-accuracy "
        "0.9 in 2h00m, 4 GPU-hours"
    ) in done.stdout
    assert "not shown" not in done.stderr


def test_notes_that_cannot_be_fetched_leave_the_plan_as_it_was(
    make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files=base_files())
    base, pr = checkouts(remote, tmp_path)  # no sync has written a note

    for nowhere in (remote.url, (tmp_path / "no-such-repository").as_uri()):
        done = plan_step(pr, base, nowhere)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "| changed | `default/mnist` |" in done.stdout
        assert "its last run" not in done.stdout
        (said,) = [line for line in done.stderr.splitlines() if "not shown" in line]
        assert said.startswith("the changed jobs' earlier runs are not shown: no notes (")
