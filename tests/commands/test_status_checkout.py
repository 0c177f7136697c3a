"""`mxgitops status` as a new user first runs it (issue 47): in any directory of a
checkout of the jobs repository, it finds the repository; a note another instance
wrote is said to be that instance's, not doubted as a forgery."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.commands.sync import sync
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.gitsync import REF, status
from tests.helpers.sync import files, git_config, mxjob
from tests.kubeapi.harness import KubeAPI


@pytest.fixture
def synced(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> tuple[GitRemote, str]:
    """A jobs repository synced once (its note on the remote), and the instance."""
    remote = make_git_remote("jobs", files=files(mxjob("a", servers=0)))
    config = git_config(remote, kubeapi, tmp_path)
    assert sync(config).note_written
    return remote, config.instance


def test_status_in_a_subdirectory_of_a_checkout_finds_the_repository(
    synced: tuple[GitRemote, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote, _ = synced
    remote.git("fetch", "--quiet", "origin", f"+{REF}:{REF}")  # a clone fetches no notes
    monkeypatch.chdir(remote.work / "jobs")

    result = CliRunner().invoke(main, ["status", "--cache-dir", str(tmp_path / "status-cache")])

    assert result.exit_code == 0, result.output
    assert "ml/a" in result.stdout


def test_status_outside_any_checkout_still_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain" / "deeper"
    plain.mkdir(parents=True)
    monkeypatch.chdir(plain)
    result = CliRunner().invoke(main, ["status", "--cache-dir", str(tmp_path / "status-cache")])
    assert result.exit_code == 2, result.output
    assert "is a plain directory" in result.stderr


def test_a_note_of_another_instance_is_said_to_be_its_not_doubted(
    synced: tuple[GitRemote, str], tmp_path: Path
) -> None:
    remote, instance = synced
    result = status(remote, tmp_path, "--instance", "someone-else")
    assert result.exit_code == 0, result.output
    assert "cannot vouch" not in result.stderr
    assert result.stderr.splitlines()[0] == (
        f"Note: the note on {remote.rev()[:12]} ({REF}) was written by instance "
        f"{instance}, not someone-else: it is {instance}'s status"
    )
