"""Helpers of `tests/node/test_training.py` that other test modules use too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from mxgitops.cli import main
from tests.controlplane.harness import RealCluster
from tests.controlplane.rootfs import TRAINING_IMAGE
from tests.gitrepos.fixtures import GitRemote

NS = "default"


TRAIN_TIMEOUT = 300.0


RESULT = "training result: "


def training_container() -> dict[str, Any]:
    """The training image's container: the script baked into it, small requests (what
    Kueue counts against a ClusterQueue's quota, where the job is queued)."""
    return {
        "name": "mxnet",
        "image": TRAINING_IMAGE,
        "imagePullPolicy": "Never",  # no registry: the image was imported into containerd
        "command": ["python3", "/opt/mxtrain/train.py"],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
    }


def replica(kind: str, count: int, **extra: Any) -> dict[str, Any]:
    return {
        "replicas": count,
        "mxReplicaType": kind,
        "template": {"spec": {"restartPolicy": "Never", "containers": [training_container()]}},
        **extra,
    }


def manifest(name: str, mode: str, replicas: list[dict[str, Any]]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "mxnet.mlkube.io/v1beta1",
            "kind": "MxJob",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"jobMode": mode, "replicaSpecs": replicas},
        }
    )


def cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def sync_args(remote: GitRemote, cluster: RealCluster, cache: Path) -> list[str]:
    return [
        "--repo",
        remote.url,
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--cache-dir",
        str(cache),
        "--instance",
        "node",
        "--state-namespace",
        "mxgitops",
    ]


def pods_of(cluster: RealCluster, job: str) -> list[dict[str, Any]]:
    return [
        p
        for p in cluster.objects("pods", NS)
        if p["metadata"].get("labels", {}).get("job-name", "").startswith(f"{job}-")
    ]


def log_of(cluster: RealCluster, pod: dict[str, Any]) -> str:
    path = f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}/log"
    response = cluster.rest.session.get(
        cluster.url + path, params={"container": "mxnet"}, timeout=30
    )
    response.raise_for_status()
    return response.text


def job_state(remote: GitRemote, cache: Path, name: str) -> dict[str, Any]:
    out = cli("status", "--repo", remote.url, "--cache-dir", str(cache), "-o", "json")
    jobs = {job["name"]: job for job in json.loads(out)["jobs"]}
    return dict(jobs[name])
