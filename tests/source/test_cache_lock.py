"""Syncs sharing one Git cache directory take turns: a file lock, waited for up to a bound.

Real git over file://, the API double as the cluster. The waiting sync is
observed through its progress phases (it says whom it waits for), so nothing
here sleeps: the test holds the lock itself, sees the sync wait, lets it go.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.commands.sync import Progress, SyncOutcome, sync
from mxgitops.errors import CacheBusyError
from mxgitops.settings.config import SyncConfig
from mxgitops.source import cachelock
from mxgitops.source import repository as source
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.gitsync import INSTANCE, NS, jobs_files
from tests.kubeapi.harness import KubeAPI


@pytest.fixture
def remote(make_git_remote: Callable[..., GitRemote]) -> GitRemote:
    return make_git_remote("jobs", files=jobs_files("alpha", "beta"))


def config(remote: GitRemote, cache: Path, kubeapi: KubeAPI, **overrides: Any) -> SyncConfig:
    values: dict[str, Any] = {
        "repo": remote.url,
        "path": "jobs",
        "namespace": NS,
        "instance": INSTANCE,
        "cache_dir": cache,
        "kubeconfig": kubeapi.kubeconfig,
        **overrides,
    }
    return SyncConfig(**values)


class Phases(Progress):
    """Records phases; sets `waiting` when the sync says it waits for the cache."""

    def __init__(self) -> None:
        self.phases: list[str] = []
        self.waiting = threading.Event()

    def phase(self, description: str, total: int | None = None) -> None:
        self.phases.append(description)
        if description.startswith("waiting for"):
            self.waiting.set()


def test_a_second_sync_waits_for_the_cache_then_proceeds(
    remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    sync(config(remote, cache, kubeapi))  # the cache exists
    phases, outcomes = Phases(), []
    repository = source.Repository(remote.url, cache_dir=cache)
    with repository.locked():  # another process's sync, as far as the lock can tell
        waiter = threading.Thread(
            target=lambda: outcomes.append(sync(config(remote, cache, kubeapi), progress=phases))
        )
        waiter.start()
        assert phases.waiting.wait(timeout=30), phases.phases
        assert not outcomes  # it does not touch the cache meanwhile
    waiter.join(timeout=60)
    (outcome,) = outcomes
    assert outcome.ok and outcome.workspace.commit == remote.rev()
    assert any(str(cache) in p for p in phases.phases if p.startswith("waiting")), phases.phases


def test_a_cache_held_past_the_bound_is_reported_clearly(
    remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setattr(cachelock, "DEFAULT_TIMEOUT", 0.0)
    with source.Repository(remote.url, cache_dir=cache).locked():
        with pytest.raises(CacheBusyError, match="in use by another mxgitops process"):
            sync(config(remote, cache, kubeapi))
        result = CliRunner().invoke(
            main,
            [
                *("sync", "--repo", remote.url, "--path", "jobs", "--cache-dir", str(cache)),
                *("--kubeconfig", str(kubeapi.kubeconfig), "--namespace", NS),
                *("--instance", INSTANCE),
            ],
        )
    assert result.exit_code == 5, result.output
    assert "Error: the Git cache" in result.output and "--cache-dir" in result.output
    assert not kubeapi.request_log  # it stopped before reading the cluster


def test_three_syncs_sharing_one_new_cache_all_succeed(
    remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    outcomes: list[SyncOutcome] = []
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def one() -> None:
        start.wait()
        try:
            outcomes.append(sync(config(remote, cache, kubeapi, dry_run=True, notes=False)))
        except BaseException as exc:  # reported below, with the others' outcomes
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert len(outcomes) == 3
    assert {o.workspace.commit for o in outcomes} == {remote.rev()}
    assert all({j.name for j in o.summary.jobs} == {"alpha", "beta"} for o in outcomes)


def test_status_takes_its_turn_in_the_cache_too(
    remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`status` fetches into the same cache as a sync: it must not do so while a sync
    holds it (it would break that sync's checkout)."""
    from mxgitops.commands.status import read_status

    cache = tmp_path / "cache"
    sync(config(remote, cache, kubeapi))
    monkeypatch.setattr(cachelock, "DEFAULT_TIMEOUT", 0.0)
    busy = pytest.raises(CacheBusyError, match="in use by another mxgitops process")
    with source.Repository(remote.url, cache_dir=cache).locked(), busy:
        read_status(config(remote, cache, kubeapi), None)
    summary, sha, _ = read_status(config(remote, cache, kubeapi), None)
    assert sha == remote.rev() and summary is not None
