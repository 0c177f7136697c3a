"""Helpers of `tests/e2e/test_sync_git.py` that other test modules use too."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.outputs import report
from mxgitops.outputs import summary as mxgitops_summary
from mxgitops.settings.config import SyncConfig
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
