"""A dry run on a laptop says which cluster it plans against (issue 47, the first hour).

`sync --dry-run` plans against the current kubeconfig context when there is one: its
first line names that context, or says there is no kubeconfig and the cluster is taken
as empty; `--offline` plans against an empty cluster on purpose, asking none. A
`--context` that names no context lists the ones there are; with no kubeconfig at all,
`--context` is an error, not ignored. The API double is the cluster.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from mxgitops.cli import main
from tests.helpers.gitsync import jobs_files
from tests.kubeapi.harness import KubeAPI


@pytest.fixture(autouse=True)
def laptop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home with no ~/.kube/config, no $KUBECONFIG, no MXGITOPS_*, not in a pod; the
    logger the CLI reconfigures restored afterwards."""
    for name in list(os.environ):
        if name.startswith("MXGITOPS_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    logger = logging.getLogger("mxgitops")
    saved = (logger.handlers[:], logger.propagate, logger.level)
    yield home
    logger.handlers[:], logger.propagate, logger.level = saved


@pytest.fixture
def jobs(tmp_path: Path) -> Path:
    """A plain directory of manifests, as `sync --dry-run --repo DIR` reads it."""
    root = tmp_path / "jobs-repo"
    for name, text in jobs_files("alpha").items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def dry_run(jobs: Path, tmp_path: Path, *extra: str | Path) -> Result:
    args = ["sync", "--dry-run", "--repo", jobs, "--path", "jobs", "--cache-dir", tmp_path / "c"]
    return CliRunner().invoke(main, [str(a) for a in [*args, *extra]])


def with_second_context(kubeapi: KubeAPI, name: str, tmp_path: Path) -> Path:
    """A copy of the cluster's kubeconfig (the real backend's is the session's: left as
    it is) with one more context, the same cluster, not current."""
    config: dict[str, Any] = yaml.safe_load(Path(kubeapi.kubeconfig).read_text())
    first = config["contexts"][0]
    config["contexts"].append({"name": name, "context": dict(first["context"])})
    copy = tmp_path / "kubeconfig-two-contexts"
    copy.write_text(yaml.safe_dump(config))
    return copy


@pytest.mark.double_only("its kubeconfig names the double's context, kubeapi")
def test_a_dry_run_names_the_context_of_the_laptops_kubeconfig(
    laptop: Path, jobs: Path, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    (laptop / ".kube").mkdir()
    shutil.copy(kubeapi.kubeconfig, laptop / ".kube" / "config")

    result = dry_run(jobs, tmp_path)

    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("Note: planning against the kubeconfig context kubeapi"), first
    assert str(laptop / ".kube" / "config") in first
    assert kubeapi.request_log, "the plan was made against the cluster the context names"


def test_a_dry_run_names_the_context_it_was_given(
    jobs: Path, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    kubeconfig = with_second_context(kubeapi, "staging", tmp_path)
    result = dry_run(jobs, tmp_path, "--kubeconfig", kubeconfig, "--context", "staging")
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("Note: planning against the kubeconfig context staging"), first


def test_with_no_kubeconfig_the_first_line_says_the_cluster_is_taken_as_empty(
    jobs: Path, tmp_path: Path
) -> None:
    result = dry_run(jobs, tmp_path)
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("Note: no cluster configured (no kubeconfig)"), first
    assert "planning against an empty cluster" in first


def test_offline_plans_against_an_empty_cluster_and_asks_none(
    jobs: Path, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    kubeapi.clear_log()
    result = dry_run(jobs, tmp_path, "--kubeconfig", kubeapi.kubeconfig, "--offline")
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first == "Note: --offline: planning against an empty cluster; no cluster was asked"
    assert "1 to create" in result.stdout
    assert kubeapi.request_log == []


def test_offline_is_a_dry_run(jobs: Path, kubeapi: KubeAPI, tmp_path: Path) -> None:
    args = ["sync", "--offline", "--repo", jobs, "--path", "jobs", "--cache-dir", tmp_path / "c"]
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].startswith("Plan "), result.stdout
    assert kubeapi.objects("jobs") == []


@pytest.mark.double_only("its kubeconfig names the double's context, kubeapi")
@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "sync"])
def test_a_context_not_in_the_kubeconfig_lists_the_ones_there_are(
    jobs: Path, kubeapi: KubeAPI, tmp_path: Path, dry: bool
) -> None:
    kubeconfig = with_second_context(kubeapi, "staging", tmp_path)
    args = ["sync", "--repo", jobs, "--path", "jobs", "--cache-dir", tmp_path / "c"]
    args += ["--kubeconfig", kubeconfig, "--context", "prod"]
    result = CliRunner().invoke(main, [str(a) for a in [*args, *(["--dry-run"] if dry else [])]])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line == (
        f"Error: --context prod: no such context in {kubeconfig}; its contexts: kubeapi, staging"
    )


def test_a_context_with_no_kubeconfig_is_an_error(jobs: Path, tmp_path: Path) -> None:
    result = dry_run(jobs, tmp_path, "--context", "prod")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        "Error: --context prod needs a kubeconfig, and none was found "
        "(--kubeconfig, $KUBECONFIG, ~/.kube/config)"
    )
