"""loadcache: a sync with no new commit reuses the verdict on the same Git tree, and
anything else (a new tree, other settings, a damaged entry) validates again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mxgitops import loadcache, manifests
from mxgitops.sync import sync
from tests.gitfixtures import GitRemote
from tests.test_sync_git_e2e import config_for, jobs_files

SHARED = Path(__file__).resolve().parents[2] / "shared" / "examples" / "upstream"
EXAMPLE = Path(__file__).resolve().parents[1] / "jobs-repo-example"


@pytest.mark.parametrize("root", [SHARED, EXAMPLE], ids=["upstream", "jobs-repo-example"])
def test_a_remembered_result_equals_a_fresh_one(root: Path, tmp_path: Path) -> None:
    fresh = manifests.load([root])
    assert fresh.jobs and (fresh.problems or root == EXAMPLE)
    cache = tmp_path / "manifests.json"
    loadcache.load(cache, "tree", ("ns",), lambda: fresh)
    remembered = loadcache.load(cache, "tree", ("ns",), lambda: pytest.fail("validated again"))
    assert remembered == fresh
    assert [j.spec_hash for j in remembered.jobs] == [j.spec_hash for j in fresh.jobs]
    assert [j.source_path for j in remembered.jobs] == [j.source_path for j in fresh.jobs]


def test_another_tree_other_settings_or_a_damaged_entry_validate_again(tmp_path: Path) -> None:
    cache, calls = tmp_path / "manifests.json", []

    def validate() -> manifests.LoadResult:
        calls.append(1)
        return manifests.load([EXAMPLE])

    loadcache.load(cache, "tree-a", ("ns",), validate)
    loadcache.load(cache, "tree-b", ("ns",), validate)
    loadcache.load(cache, "tree-b", ("other-ns",), validate)
    cache.write_text("{not json")
    loadcache.load(cache, "tree-b", ("other-ns",), validate)
    entry = json.loads(cache.read_text())
    entry["result"] = {"jobs": "garbage"}
    cache.write_text(json.dumps(entry))
    loadcache.load(cache, "tree-b", ("other-ns",), validate)
    assert len(calls) == 5
    loadcache.load(cache, "tree-b", ("other-ns",), validate)
    assert len(calls) == 5  # rewritten after the damage, and reused


def test_a_sync_without_a_new_commit_does_not_validate_again(
    make_git_remote: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote: GitRemote = make_git_remote("jobs", files=jobs_files("alpha", "beta"))
    config = config_for(remote.url, tmp_path / "cache", None, dry_run=True)
    calls: list[int] = []
    real_load = manifests.load

    def counting_load(*args: Any, **kwargs: Any) -> manifests.LoadResult:
        calls.append(1)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(manifests, "load", counting_load)
    first = sync(config)
    second = sync(config)
    assert len(calls) == 1
    assert second.summary.jobs == first.summary.jobs

    remote.commit(jobs_files("gamma"))
    third = sync(config)
    assert len(calls) == 2
    assert {j.name for j in third.summary.jobs} == {"alpha", "beta", "gamma"}
