"""Helpers of `tests/node/test_cronjob.py` that other test modules use too: the example
overlay as a user installs it on the real node."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from tests.controlplane.harness import RealCluster
from tests.controlplane.projectimage import PROJECT_IMAGE

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = ROOT / "cronjob" / "overlays" / "example"
NAMESPACE = "mxgitops-example"  # the example overlay's
CRONJOB = "mxgitops-example"
TOKEN = "s3cret-token"


def user_overlay(directory: Path, repo_url: str) -> Path:
    """The user's kustomization: the example overlay, with only the image and the
    repository URL set."""
    directory.mkdir(parents=True)
    name, tag = PROJECT_IMAGE.rsplit(":", 1)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(OVERLAY, directory)],
        "images": [{"name": "ghcr.io/example/mxgitops", "newName": name, "newTag": tag}],
        "configMapGenerator": [
            {
                "name": "mxgitops-config",
                "behavior": "merge",
                "literals": [f"MXGITOPS_REPO={repo_url}"],
            }
        ],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return directory


def cache_volume(cluster: RealCluster, directory: Path) -> None:
    """What a cluster's storage provides: a volume the Git cache's claim binds to,
    writable by the sync's user (10001)."""
    directory.mkdir(parents=True)
    os.chown(directory, 10001, 10001)
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "mxgitops-cache-node-test"},
        "spec": {
            "capacity": {"storage": "2Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "hostPath": {"path": str(directory), "type": "Directory"},
            "claimRef": {"namespace": NAMESPACE, "name": "mxgitops-cache-example"},
        },
    }
    status, _, body = cluster.raw("POST", "/api/v1/persistentvolumes", volume)
    assert status == 201, body


def git_secret(cluster: RealCluster) -> None:
    cluster.ensure_namespace(NAMESPACE)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "mxgitops-git"},
        "stringData": {"token": TOKEN},
    }
    status, _, body = cluster.raw("POST", f"/api/v1/namespaces/{NAMESPACE}/secrets", secret)
    assert status == 201, body
