"""End to end through Git: a bare repository as the remote, the API double as the cluster.

Every test pushes manifests to a bare remote (file://, or http:// through the loopback git
server of tests/gitrepos/fixtures.py), runs `mxgitops.commands.sync.sync`, and asserts on
the double's
objects and request log, on the remote's refs and notes, and on the cache. Races are
interleaved deterministically through the sync's progress callbacks; nothing sleeps.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mxgitops.commands.sync import Progress, SyncOutcome, sync
from tests.gitrepos.fixtures import GitRemote, run_git
from tests.helpers.gitsync import (
    INSTANCE,
    NS,
    WRITES,
    config_for,
    jobs_files,
    mxjob,
    note_summary,
    remote,
)
from tests.kubeapi.harness import KubeAPI

__all__ = ["remote"]  # fixtures from tests/helpers, used here

NOTES_REF = "refs/notes/mxgitops"


def job_names(kubeapi: KubeAPI) -> set[str]:
    return {
        o["metadata"]["name"]
        for o in kubeapi.objects("jobs", NS)
        if o["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == INSTANCE
        or "mxgitops" in str(o["metadata"].get("labels", {}))
    }


def images(kubeapi: KubeAPI) -> set[str]:
    return {
        c["image"]
        for o in kubeapi.objects("jobs", NS)
        for c in o["spec"]["template"]["spec"]["containers"]
    }


def notes_refs(repo: Path, *, bare: bool) -> str:
    args = ("for-each-ref", "--format=%(refname) %(objectname)", "refs/notes")
    if bare:
        return run_git(*args, cwd=repo)
    return run_git("--git-dir", str(repo / ".git"), *args, cwd=repo)


def actions(outcome: SyncOutcome) -> dict[str, str]:
    return {job.name: job.action for job in outcome.summary.jobs}


# -- the life of a jobs repository ------------------------------------------------------


def test_push_sync_change_delete_with_notes(
    remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    config = config_for(remote.url, tmp_path / "cache", kubeapi)

    first = sync(config)
    sha1 = remote.rev()
    assert first.ok and first.note_written
    assert first.workspace.checkout is not None and first.workspace.checkout.cloned
    assert first.workspace.commit == sha1
    assert set(actions(first).values()) == {"create"}
    assert len(kubeapi.objects("jobs", NS)) == 3
    note = note_summary(remote, sha1)
    assert note.commit == sha1 and {j.name for j in note.jobs} == {"alpha", "beta", "gamma"}

    sha2 = remote.commit(
        {"jobs/beta.yaml": mxjob("beta", image="mxnet/python:1.9.1_gpu")}, "new image"
    )
    second = sync(config)
    assert second.ok and second.note_written
    assert actions(second)["beta"] == "replace"
    assert "mxnet/python:1.9.1_gpu" in images(kubeapi)
    assert {j.name: j.action for j in note_summary(remote, sha2).jobs}["beta"] == "replace"

    sha3 = remote.commit({"jobs/gamma.yaml": None}, "remove gamma")
    third = sync(config)
    assert third.ok and third.note_written
    assert actions(third)["gamma"] == "delete"
    remaining = {o["metadata"]["name"] for o in kubeapi.objects("jobs", NS)}
    assert not any(name.startswith("gamma") for name in remaining)
    assert len(remaining) == 2
    assert {j.name: j.action for j in note_summary(remote, sha3).jobs}["gamma"] == "delete"
    # Every synced commit keeps its note.
    assert all(remote.note(sha) for sha in (sha1, sha2, sha3))


def test_second_sync_without_new_commit_reuses_cache_and_writes_no_note(
    remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    config = config_for(remote.url, tmp_path / "cache", kubeapi)
    first = sync(config)
    assert first.note_written
    assert {j.state for j in note_summary(remote, remote.rev()).jobs} == {"Pending"}
    before = remote.refs()
    kubeapi.clear_log()

    again = sync(config)

    assert again.ok
    assert again.workspace.checkout is not None
    assert again.workspace.checkout.cloned is False
    assert again.workspace.checkout.forced_update is None
    assert again.note_written is False
    assert {c.action.value for c in again.plan.changes} == {"unchanged"}
    assert set(actions(again).values()) == {"unchanged"}  # what this sync did
    # The note keeps the last real action.
    assert actions(first) == {j.name: j.action for j in note_summary(remote, remote.rev()).jobs}
    assert remote.refs() == before
    assert not [e for e in kubeapi.request_log if e["method"] in WRITES]


def test_two_syncs_racing_on_the_notes_push_both_land(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """B fetches, then A syncs another commit and pushes its note, then B writes its note:
    B's push is rejected, B merges A's notes and pushes again. Both notes end up on the
    remote. (Two instances, so the two syncs do not share a Lease or jobs.)"""
    remote = make_git_remote("race", files=jobs_files("alpha", "beta"))
    sha_a = remote.rev()
    sha_b = remote.commit(jobs_files("alpha", "beta", "delta"), "add delta")
    config_a = config_for(remote.url, tmp_path / "cache-a", kubeapi, ref=sha_a, instance="a")
    config_b = config_for(remote.url, tmp_path / "cache-b", kubeapi, instance="b")
    outcomes: list[SyncOutcome] = []

    class RunAWhenBWritesItsNote(Progress):
        def phase(self, description: str, total: int | None = None) -> None:
            if description == "writing the status note" and not outcomes:
                outcomes.append(sync(config_a))

    outcome_b = sync(config_b, progress=RunAWhenBWritesItsNote())

    assert outcomes and outcomes[0].note_written and outcome_b.note_written
    assert note_summary(remote, sha_a).instance == "a"
    assert note_summary(remote, sha_b).instance == "b"
    # A's push came first, so B's note was pushed on top of it: A's notes commit is an
    # ancestor of the remote's notes ref.
    tip = run_git("rev-parse", NOTES_REF, cwd=remote.bare)
    assert len(run_git("rev-list", tip, cwd=remote.bare).split()) >= 3
    # B's first push was rejected: it merged A's notes (a merge commit) and pushed again.
    assert run_git("rev-list", "--merges", tip, cwd=remote.bare)


def test_dry_run_changes_nothing(remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    config = config_for(remote.url, cache, kubeapi)
    sync(config)  # a real sync first: the cache and the remote have notes
    remote.commit(
        {**jobs_files("alpha", "beta", image="mxnet/python:2.0"), "jobs/gamma.yaml": None},
        "bump and drop gamma",
    )
    remote_before = remote.refs()
    cache_notes_before = notes_refs(cache / next(p.name for p in cache.iterdir()), bare=False)
    objects_before = kubeapi.objects("jobs", NS)
    kubeapi.clear_log()

    planned = sync(config_for(remote.url, cache, kubeapi, dry_run=True))

    assert planned.summary.dry_run and not planned.note_written
    assert actions(planned) == {"alpha": "replace", "beta": "replace", "gamma": "delete"}
    assert {e["method"] for e in kubeapi.request_log} == {"GET"}
    assert kubeapi.objects("jobs", NS) == objects_before
    assert remote.refs() == remote_before
    cache_repo = cache / next(p.name for p in cache.iterdir())
    assert notes_refs(cache_repo, bare=False) == cache_notes_before


def test_force_push_is_followed_and_reported(
    remote: GitRemote, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    config = config_for(remote.url, tmp_path / "cache", kubeapi)
    remote.commit(jobs_files("alpha", "beta", "gamma", image="mxnet/python:bad"), "bad image")
    assert sync(config).ok
    rewritten = remote.rewrite_last_commit(
        {"jobs/alpha.yaml": mxjob("alpha", image="mxnet/python:good")}
    )

    outcome = sync(config)

    assert outcome.workspace.commit == rewritten
    checkout = outcome.workspace.checkout
    assert checkout is not None and checkout.forced_update
    assert "force-pushed" in checkout.forced_update
    assert any("force-pushed" in n for n in outcome.notices)
    assert "mxnet/python:good" in images(kubeapi)
    assert remote.note(rewritten) is not None


def test_http_remote_with_token_in_url(
    make_git_remote: Callable[..., GitRemote],
    make_git_http_server: Callable[..., Any],
    kubeapi: KubeAPI,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    remote = make_git_remote("secured", files=jobs_files("alpha", "beta"))
    server = make_git_http_server(remote.bare.parent, logins={("user", "s3cr3t-token")})
    url = server.url("secured", "user:s3cr3t-token")
    cache = tmp_path / "cache"
    caplog.set_level("DEBUG", logger="mxgitops")

    outcome = sync(config_for(url, cache, kubeapi))

    assert outcome.ok and outcome.note_written
    assert len(kubeapi.objects("jobs", NS)) == 2
    assert remote.note(remote.rev()) is not None
    assert "s3cr3t-token" not in caplog.text
    assert "s3cr3t-token" not in remote.note(remote.rev())  # type: ignore[operator]
    assert "s3cr3t-token" not in str(outcome.summary) + str(outcome.notices)
    leaked = subprocess.run(
        ["grep", "-rl", "s3cr3t-token", str(cache)], capture_output=True, check=False
    )
    assert leaked.stdout == b"", f"token stored in {leaked.stdout.decode()}"
    assert any(a.startswith("Basic ") for a in server.authorizations)
