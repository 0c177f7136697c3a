"""loadcache: each file's verdict is reused while its name and text, the settings and
mxgitops' code are the same; a sync validates only the files it has not seen, from a
Git repository or a plain directory alike. Validation is counted as YAML files parsed."""

from __future__ import annotations

import dataclasses
import gc
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from mxgitops.commands.sync import sync
from mxgitops.manifests import files as manifestfiles
from mxgitops.manifests import loadcache, yamldoc
from mxgitops.manifests import loading as manifests
from mxgitops.settings.config import SyncConfig
from tests.gitrepos.fixtures import GitRemote
from tests.helpers import corpus
from tests.helpers.gitsync import config_for, jobs_files, mxjob

EXAMPLE = Path(__file__).resolve().parents[2] / "jobs-repo-example"
# The example manifests (own, and external where present), then the jobs repository's.
ROOTS = [*corpus.root_params(), pytest.param(EXAMPLE, id="jobs-repo-example")]


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per file whose YAML is parsed, i.e. validated."""
    calls: list[int] = []
    real = yamldoc.documents

    def counting(text: str) -> Any:
        calls.append(1)
        return real(text)

    monkeypatch.setattr(manifests, "documents", counting)
    return calls


def load(cache: Path, root: Path, namespace: str = "ns") -> manifests.LoadResult:
    def validate(verdicts: manifests.Verdicts) -> manifests.LoadResult:
        return manifests.load([root], default_namespace=namespace, verdicts=verdicts)

    return loadcache.load(cache, (namespace,), validate)


@pytest.mark.parametrize("root", ROOTS)
def test_a_remembered_result_equals_a_fresh_one(
    root: Path, tmp_path: Path, parsed: list[int]
) -> None:
    fresh = manifests.load([root], default_namespace="ns")
    assert fresh.jobs and (fresh.problems or root == EXAMPLE)
    cache = tmp_path / "manifests.json"
    assert load(cache, root) == fresh
    files = len(parsed)
    remembered = load(cache, root)
    assert len(parsed) == files  # nothing parsed again
    assert remembered == fresh
    assert [j.spec_hash for j in remembered.jobs] == [j.spec_hash for j in fresh.jobs]
    assert [j.source_path for j in remembered.jobs] == [j.source_path for j in fresh.jobs]


def test_only_a_changed_or_new_file_is_validated_again(tmp_path: Path, parsed: list[int]) -> None:
    root, cache = tmp_path / "jobs", tmp_path / "manifests.json"
    root.mkdir()
    for name in ("a", "b", "c"):
        (root / f"{name}.yaml").write_text(mxjob(name))
    load(cache, root)
    assert len(parsed) == 3
    (root / "b.yaml").write_text(mxjob("b", image="mxnet/python:2.0"))
    (root / "d.yaml").write_text(mxjob("a"))  # a duplicate: checked across files each time
    result = load(cache, root)
    assert len(parsed) == 5
    assert result == manifests.load([root], default_namespace="ns")
    assert [j.name for j in result.jobs] == ["b", "c"]
    assert ("ns", "a") in result.invalid_keys and "defined more than once" in str(result.problems)
    (root / "d.yaml").unlink()
    assert [j.name for j in load(cache, root).jobs] == ["a", "b", "c"]
    assert len(parsed) == 9  # the fresh load compared with parsed four; this one none
    assert len(json.loads(cache.read_text())["files"]) == 3  # d's verdict went with d


def test_other_settings_or_a_damaged_entry_validate_again(
    tmp_path: Path, parsed: list[int]
) -> None:
    cache = tmp_path / "manifests.json"
    files = len(manifestfiles.manifest_files(EXAMPLE)[0])
    load(cache, EXAMPLE)
    load(cache, EXAMPLE, namespace="other-ns")
    assert len(parsed) == 2 * files
    cache.write_text("{not json")
    load(cache, EXAMPLE, namespace="other-ns")
    entry = json.loads(cache.read_text())
    some = next(iter(entry["files"]))
    entry["files"][some] = {"named": "garbage"}
    cache.write_text(json.dumps(entry))
    load(cache, EXAMPLE, namespace="other-ns")
    assert len(parsed) == 3 * files + 1
    load(cache, EXAMPLE, namespace="other-ns")
    assert len(parsed) == 3 * files + 1  # rewritten after the damage, and reused


def test_a_sync_without_a_new_commit_validates_no_file_again(
    make_git_remote: Any, tmp_path: Path, parsed: list[int]
) -> None:
    remote: GitRemote = make_git_remote("jobs", files=jobs_files("alpha", "beta"))
    config = config_for(remote.url, tmp_path / "cache", None, dry_run=True)
    first = sync(config)
    second = sync(config)
    assert len(parsed) == 2
    assert second.summary.jobs == first.summary.jobs

    remote.commit(jobs_files("gamma"))
    third = sync(config)
    assert len(parsed) == 3  # gamma only
    assert {j.name for j in third.summary.jobs} == {"alpha", "beta", "gamma"}


def test_a_plain_directory_is_validated_once_too(tmp_path: Path, parsed: list[int]) -> None:
    root = Path(shutil.copytree(EXAMPLE / "jobs", tmp_path / "jobs"))
    files = len(manifestfiles.manifest_files(root)[0])
    config = SyncConfig(repo=str(root), dry_run=True, cache_dir=tmp_path / "cache")
    first, second = sync(config), sync(config)
    assert len(parsed) == files
    assert second.summary.jobs == first.summary.jobs
    assert loadcache.directory_cache(config.cache_dir, root).is_file()
    assert not list(root.rglob("*.json"))  # nothing written into the directory synced


def test_a_sync_collects_cycles_less_often_and_restores_the_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a sync builds lives until it ends: the collector is not run every 700 new
    objects meanwhile (it re-walked them all, 0.3-0.5 s of a first sync of 1,000 jobs)."""
    during: list[tuple[int, int, int]] = []
    real_load = manifests.load
    monkeypatch.setattr(
        manifests, "load", lambda *a, **k: during.append(gc.get_threshold()) or real_load(*a, **k)
    )
    before = gc.get_threshold()
    root = Path(shutil.copytree(EXAMPLE / "jobs", tmp_path / "jobs"))
    assert sync(SyncConfig(repo=str(root), dry_run=True, cache_dir=tmp_path / "cache")).ok
    assert during and during[0][0] >= 50_000
    assert gc.get_threshold() == before


PUBLISHED = Path(__file__).resolve().parents[1] / "data" / "published"


@pytest.mark.parametrize("root", [*ROOTS, pytest.param(PUBLISHED, id="published")])
def test_verdicts_are_kept_as_dataclasses_asdict_wrote_them(root: Path, tmp_path: Path) -> None:
    """The cache is written without `asdict` (whose deep copies were most of writing
    it), and says the same: every field, in the same order, in the same JSON."""
    verdicts = loadcache.Remembered({})
    result = manifests.load([root], default_namespace="ns", verdicts=verdicts)
    assert result.jobs and verdicts.changed
    for job in result.jobs:
        assert json.dumps(job.to_dict()) == json.dumps(dataclasses.asdict(job))
    for verdict in verdicts._added.values():
        assert json.dumps(loadcache._encode(verdict)) == json.dumps(_encoded_by_asdict(verdict))


def _encoded_by_asdict(verdict: manifests.FileVerdict) -> dict[str, Any]:
    """How the verdicts were encoded before: `dataclasses.asdict` throughout."""
    asdict = dataclasses.asdict
    return {
        "named": [
            {**asdict(n), "job": asdict(n.job) if n.job is not None else None}
            for n in verdict.named
        ],
        "problems": [asdict(p) for p in verdict.problems],
        "warnings": [asdict(w) for w in verdict.warnings],
        "ignored": [asdict(i) for i in verdict.ignored],
        "invalid": sorted(verdict.invalid),
        "unnamed_invalid": verdict.unnamed_invalid,
    }
