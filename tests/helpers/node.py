"""Jobs on the real node: a distributed MXNet job's manifest, the CLI's sync, its pods
and logs read back; under JobSet and Kueue; the example CronJob overlay as a user
installs it."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml
from click.testing import CliRunner

from mxgitops.cli import main
from tests.controlplane.harness import RealCluster
from tests.controlplane.projectimage import PROJECT_IMAGE
from tests.controlplane.rest import Rest
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


QUEUE = "team"


ROLES = {"scheduler": 1, "server": 2, "worker": 3}


def jobset_replica(count: int) -> dict[str, Any]:
    return {
        "replicas": count,
        "restartPolicy": "Never",
        "template": {"spec": {"containers": [training_container()]}},
    }


def queued_mxjob(name: str, queue: str = QUEUE) -> str:
    """A Kubeflow MXJob naming a Kueue LocalQueue: it runs on JobSet, admitted by Kueue."""
    return yaml.safe_dump(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MXJob",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "jobMode": "MXTrain",
                "runPolicy": {"schedulingPolicy": {"queue": queue}},
                "mxReplicaSpecs": {
                    "Scheduler": jobset_replica(ROLES["scheduler"]),
                    "Server": jobset_replica(ROLES["server"]),
                    "Worker": jobset_replica(ROLES["worker"]),
                },
            },
        }
    )


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for found in (obj.get("status") or {}).get("conditions") or []:
        if found["type"] == kind and found["status"] == "True":
            return dict(found)
    return None


def role_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"])


def container_started(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any(
        s["name"] == "mxnet" and ("running" in s["state"] or "terminated" in s["state"])
        for s in statuses
    )


@dataclass
class LogFollower:
    """Each pod's container log as it is written (``follow=true``), one thread a pod:
    kept here when the pod and its log are deleted."""

    cluster: RealCluster
    texts: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    threads: dict[str, threading.Thread] = field(default_factory=dict)

    def follow(self, pod: str) -> None:
        if pod not in self.threads:
            thread = threading.Thread(target=self._read, args=(pod,), daemon=True)
            self.threads[pod] = thread
            thread.start()

    def _read(self, pod: str) -> None:
        plane = self.cluster.plane
        assert plane.pki is not None and plane.admin is not None
        rest = Rest(plane.url, plane.pki.ca, plane.admin.cert, plane.admin.key)  # a session each
        path = f"/api/v1/namespaces/{NS}/pods/{pod}/log"
        chunks: list[str] = []
        try:
            with rest.session.get(
                plane.url + path,
                params={"container": "mxnet", "follow": "true"},
                stream=True,
                timeout=TRAIN_TIMEOUT,
            ) as response:
                response.raise_for_status()
                for chunk in response.iter_content(chunk_size=None, decode_unicode=True):
                    chunks.append(chunk)
                    self.texts[pod] = "".join(chunks)
        except requests.RequestException as err:
            self.errors[pod] = str(err)
        self.texts[pod] = "".join(chunks)

    def done(self, pod: str) -> bool:
        thread = self.threads.get(pod)
        return thread is not None and not thread.is_alive()


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
