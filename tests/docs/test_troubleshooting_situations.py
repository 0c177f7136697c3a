"""The troubleshooting index quotes the messages a new user meets in the first hour
(issue 47), as mxgitops prints them: each test makes the situation on the `kubeapi`
fixture, runs the command as a user would, and checks that the line it printed is one
the index's table quotes (per-run values written as the page writes them). A changed
message fails here until the page says the new one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from mxgitops.cli import main
from mxgitops.objects import ownership_labels
from tests.helpers.sync import INSTANCE, NS, mxjob, write
from tests.kubeapi.harness import KubeAPI

INDEX = Path(__file__).resolve().parents[2] / "docs" / "guides" / "troubleshooting" / "index.md"
# What the page writes for what differs per run.
KUBECONFIG = "/home/me/.kube/config"
REMOTE = "file:///srv/git/jobs.git"


def quoted_in_the_index() -> list[str]:
    """The code spans of the first column of the index's table."""
    rows = [line for line in INDEX.read_text(encoding="utf-8").splitlines() if line.startswith("|")]
    return [span for row in rows for span in re.findall(r"`([^`]+)`", row.split(" | ")[0])]


def assert_quoted(line: str) -> None:
    assert line in quoted_in_the_index(), f"the troubleshooting index does not quote: {line}"


def sync(repo: str | Path, api: KubeAPI | None, tmp_path: Path, *extra: str) -> Result:
    args = ["sync", "--repo", str(repo), "--namespace", NS, "--instance", INSTANCE]
    args += ["--cache-dir", str(tmp_path / "cache"), *extra]
    if api is not None:
        args += ["--kubeconfig", str(api.kubeconfig)]
    return CliRunner().invoke(main, args, prog_name="mxgitops")


@pytest.fixture(autouse=True)
def no_status_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MXGITOPS_STATUS_TOKEN", raising=False)
    monkeypatch.delenv("MXGITOPS_GIT_TOKEN", raising=False)


def test_a_context_the_kubeconfig_has_not(kubeapi: KubeAPI, tmp_path: Path) -> None:
    config: dict[str, Any] = yaml.safe_load(Path(kubeapi.kubeconfig).read_text())
    (context,) = config["contexts"]
    config["contexts"] = [{**context, "name": "kind-dev"}, {**context, "name": "staging"}]
    config["current-context"] = "kind-dev"
    kubeconfig = tmp_path / "kubeconfig-renamed"  # a copy: the real backend's is shared
    kubeconfig.write_text(yaml.safe_dump(config))
    repo = write(tmp_path / "repo", mxjob("a", servers=0))

    result = sync(repo, None, tmp_path, "--kubeconfig", str(kubeconfig), "--context", "prod")

    assert result.exit_code == 2, result.output
    assert_quoted(result.stderr.strip().replace(str(kubeconfig), KUBECONFIG))
    planned = sync(repo, None, tmp_path, "--kubeconfig", str(kubeconfig), "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert_quoted(planned.stdout.splitlines()[0].replace(str(kubeconfig), KUBECONFIG))


def test_an_object_of_another_instance(kubeapi: KubeAPI, tmp_path: Path) -> None:
    repo = write(tmp_path / "repo", mxjob("a", servers=0))
    planned = sync(repo, kubeapi, tmp_path, "--dry-run", "-o", "json")
    (name,) = [ref.split("/")[-1] for ref in _created(planned)]
    theirs = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": ownership_labels("prod")},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            }
        },
    }
    kubeapi.create(theirs, NS)

    result = sync(repo, kubeapi, tmp_path, "--no-notes")

    assert result.exit_code == 1, result.output
    said = [line.strip() for line in result.stdout.splitlines() if "not managed by" in line]
    assert said, result.output
    assert_quoted(said[0].replace(f"job/{name} in {NS}", "job/JOB in NS"))


def _created(result: Result) -> list[str]:
    import json

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    return [ref[1:] for job in report["jobs"] for ref in job["objects"] if ref.startswith("+job/")]


def test_pruning_refused(kubeapi: KubeAPI, tmp_path: Path) -> None:
    repo = write(tmp_path / "repo", mxjob("a", servers=0))
    assert sync(repo, kubeapi, tmp_path, "--no-notes").exit_code == 0
    for manifest in repo.rglob("*.yaml"):
        manifest.unlink()

    result = sync(repo, kubeapi, tmp_path, "--no-notes")

    (refused,) = [line for line in result.stdout.splitlines() if line.startswith("Pruning")]
    assert_quoted(refused)
    assert len(kubeapi.objects("jobs", NS)) == 1  # nothing deleted


def test_a_status_provider_without_its_token(kubeapi: KubeAPI, tmp_path: Path) -> None:
    repo = write(tmp_path / "repo", mxjob("a", servers=0))
    result = sync(repo, kubeapi, tmp_path, "--no-notes", "--status-provider", "gitea")
    assert result.exit_code == 3, result.output  # the plan applied, the statuses not posted
    assert len(kubeapi.objects("jobs", NS)) == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert errors, result.output
    assert_quoted(errors[0])


def test_a_fetch_that_fails(tmp_path: Path) -> None:
    missing = tmp_path / "srv" / "git" / "jobs.git"
    result = sync(f"file://{missing}", None, tmp_path, "--offline")
    assert result.exit_code == 3, result.output
    first = result.stderr.strip().splitlines()[0]
    assert_quoted(first.replace(f"file://{missing}", REMOTE).replace(str(missing), REMOTE[7:]))
