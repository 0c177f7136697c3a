"""A sync through Git in tests: a bare repository as the remote, its jobs files and
settings, the status note read back, the forge's settings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.outputs import report
from mxgitops.outputs import summary as mxgitops_summary
from mxgitops.outputs.forge.post import StatusSettings, settings_for
from mxgitops.settings.config import SyncConfig
from tests.gitea.server import Gitea
from tests.gitrepos.fixtures import GitRemote
from tests.kubeapi.harness import KubeAPI

NS = "default"


INSTANCE = "e2e"


WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def mxjob(name: str, *, image: str = "mxnet/python:1.9.1") -> str:
    """A seed-dialect local MxJob: one WORKER replica with an `mxnet` container (a local
    job has exactly one worker, so changes go through the image)."""
    doc: dict[str, Any] = {
        "apiVersion": "mxnet.mlkube.io/v1beta1",
        "kind": "MxJob",
        "metadata": {"name": name},
        "spec": {
            "jobMode": "local",
            "replicaSpecs": [
                {
                    "replicas": 1,
                    "mxReplicaType": "WORKER",
                    "template": {
                        "spec": {
                            "restartPolicy": "OnFailure",
                            "containers": [{"name": "mxnet", "image": image, "args": ["train.py"]}],
                        }
                    },
                }
            ],
        },
    }
    return yaml.safe_dump(doc, sort_keys=False)


def jobs_files(*names: str, image: str = "mxnet/python:1.9.1") -> dict[str, str]:
    return {f"jobs/{name}.yaml": mxjob(name, image=image) for name in names}


def config_for(url: str, cache: Path, kubeapi: KubeAPI | None, **overrides: Any) -> SyncConfig:
    values: dict[str, Any] = {
        "repo": url,
        "path": "jobs",
        "namespace": NS,
        "instance": INSTANCE,
        "cache_dir": cache,
        "kubeconfig": kubeapi.kubeconfig if kubeapi is not None else None,
        **overrides,
    }
    return SyncConfig(**values)


def note_summary(remote: GitRemote, sha: str) -> mxgitops_summary.Summary:
    text = remote.note(sha)
    assert text is not None, f"no note on {sha} in the remote"
    summary = report.parse_note(text)
    assert summary is not None
    return summary


@pytest.fixture
def remote(make_git_remote: Callable[..., GitRemote]) -> GitRemote:
    return make_git_remote("jobs", files=jobs_files("alpha", "beta", "gamma"))


def job_names(kubeapi: Any) -> set[str]:
    return {o["metadata"]["name"] for o in kubeapi.objects("jobs", NS)}


REF = "refs/notes/mxgitops"


def status(remote: GitRemote, tmp_path: Path, *extra: str) -> Any:
    args = ["status", "--repo", remote.url, "--cache-dir", str(tmp_path / "status-cache")]
    return CliRunner().invoke(main, [*args, *extra])


def checked_settings(**given: Any) -> StatusSettings:
    """`settings_for` of a GitHub repository, but for what is `given`."""
    values: dict[str, Any] = {
        "provider": "github",
        "api_url": None,
        "repository": "org/jobs",
        "repo": "https://github.com/org/jobs.git",
        "token": "t",
        "url_template": "",
        "timeout": 10,
    }
    return settings_for(**{**values, **given})


@pytest.fixture(scope="module")
def gitea(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gitea]:
    with Gitea(tmp_path_factory.mktemp("gitea")) as server:
        yield server
