"""A jobs repository cannot change who mxgitops is: validate, diff and the status note all
report an operator setting in `.mxgitops.yaml`, and a sync keeps the operator's identity.

The state namespace (Lease, ledger) is the operator's too: a sync puts the jobs in the
repository's namespace and its own state where the operator said, never elsewhere.
Real git (bare remotes over file://), the API double as the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mxgitops.cli import main
from mxgitops.settings import config
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.gitsync import jobs_files
from tests.kubeapi.harness import KubeAPI

HOSTILE = "instance: team-b\nmaxPruneShare: 1\nnamespace: ml-training\n"
REFUSED = "only the operator may set this (--instance or MXGITOPS_INSTANCE"


@pytest.fixture(autouse=True)
def environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_isolation: None
) -> Iterator[None]:
    """No MXGITOPS_* or kubeconfig of the caller's, and no pod around us."""
    import os

    for name in list(os.environ):
        if name.startswith("MXGITOPS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setattr(config, "SERVICE_ACCOUNT_NAMESPACE", tmp_path / "no-pod")
    yield


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def test_validate_reports_an_operator_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "jobs"
    for name, text in {**jobs_files("alpha"), ".mxgitops.yaml": HOSTILE}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    monkeypatch.chdir(repo)
    result = invoke("validate")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f".mxgitops.yaml:1: instance: {REFUSED}")
    assert lines[1].startswith(".mxgitops.yaml:2: maxPruneShare: only the operator may set this")
    assert lines[-1] == "1 job valid, 0 invalid manifests, 2 problems, 0 documents ignored"
    # The settings it may set still apply: the job is in the repository's namespace.
    assert '"namespace": "ml-training"' in invoke("validate", "-o", "json").stdout


def test_diff_shows_a_pull_request_that_sets_one(
    make_git_remote: Callable[..., GitRemote],
) -> None:
    remote = make_git_remote("jobs", files=jobs_files("alpha"))
    base = remote.rev()
    remote.commit({".mxgitops.yaml": HOSTILE}, "take over team b")
    result = invoke("diff", base, "HEAD", "--repo", remote.work, "--path", "jobs", "-o", "markdown")
    assert result.exit_code == 1, result.output
    assert ".mxgitops.yaml" in result.stdout and "only the operator may set this" in result.stdout
    assert "instance" in result.stdout and "maxPruneShare" in result.stdout


def test_sync_keeps_the_operators_identity_and_says_so_in_the_note(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files={**jobs_files("alpha"), ".mxgitops.yaml": HOSTILE})
    result = invoke(
        "sync",
        *("--repo", remote.url, "--cache-dir", tmp_path / "cache", "--path", "jobs"),
        *("--instance", "team-a", "--state-namespace", "mxgitops"),
        *("--kubeconfig", kubeapi.kubeconfig),
    )
    assert result.exit_code == 1, result.output  # like an invalid manifest
    (job,) = kubeapi.objects("jobs", "ml-training")
    assert job["metadata"]["labels"]["mxgitops.io/instance"] == "team-a"
    assert kubeapi.get("Lease", "mxgitops-team-a", "mxgitops") is not None
    assert kubeapi.get("Lease", "mxgitops-team-b", "mxgitops") is None
    note = remote.note(remote.rev())
    assert note is not None and f".mxgitops.yaml:1: instance: {REFUSED}" in note
