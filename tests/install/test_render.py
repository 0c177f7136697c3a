"""install's manifests (mxgitops/install/render.py) are what `kubectl kustomize`
(the kubectl on PATH: the control plane's build, or the machine's) renders of the
overlay install describes, for each choice of the flags that changes the manifests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from mxgitops.install.overlay import BASE, COMPONENTS, Installation
from mxgitops.install.render import config_map_hash, render

REPO = "https://git.example.com/org/jobs.git"

CHOICES = {
    "defaults": Installation(repo=REPO, image="ghcr.io/mxgitops/mxgitops:0.1.0"),
    "every flag": Installation(
        repo=REPO,
        image="registry.example.com:5000/team/mxgitops@sha256:" + "ab" * 32,
        namespace="ml-gitops",
        branch="production",
        path="jobs/vision",
        jobs_namespace="ml-training",
        schedule="*/2 * * * *",
        receiver=True,
        queues=True,
        status_provider="gitea",
        pushgateway="http://pushgateway.monitoring.svc:9091/?a=1&b=<2>",
        token_file=Path("token"),
        ssh_key=Path("key"),
        known_hosts=Path("known_hosts"),
    ),
    "untagged image, receiver only": Installation(
        repo=REPO, image="localhost:5000/mxgitops", receiver=True
    ),
}


def kubectl_kustomize(installation: Installation, directory: Path) -> list[dict[str, object]]:
    """`kubectl kustomize` of the overlay install describes, written as a person would."""
    directory.mkdir()
    base = os.path.relpath(BASE, directory)
    components = os.path.relpath(COMPONENTS, directory)
    overlay = installation.kustomization(base, components)
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(overlay, sort_keys=False))
    (directory / "namespace.yaml").write_text(yaml.safe_dump(installation.namespace_object()))
    done = subprocess.run(
        ["kubectl", "kustomize", str(directory)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.mark.parametrize("choice", CHOICES)
def test_the_rendering_is_kubectl_kustomizes(choice: str, tmp_path: Path) -> None:
    installation = CHOICES[choice]
    assert render(installation) == kubectl_kustomize(installation, tmp_path / "overlay")


def test_the_config_maps_suffix_is_kustomizes_for_the_base() -> None:
    """`kubectl kustomize cronjob/base` names the ConfigMap with this suffix: its data
    alone decides it."""
    data = {"MXGITOPS_REPO": "https://github.com/example/mxnet-jobs.git", "A": "&<>"}
    config = {"kind": "ConfigMap", "metadata": {"name": "c"}, "data": data}
    assert config_map_hash(config) == config_map_hash({**config, "metadata": {"name": "d"}})
    assert config_map_hash(config) != config_map_hash({**config, "data": {"A": "1"}})
