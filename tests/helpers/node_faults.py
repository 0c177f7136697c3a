"""Helpers of `test_node_faults.py` that other test modules use too."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.images import TOOLBOX_IMAGE
from tests.controlplane.node import NODE_NAME
from tests.faults.conftest import FaultCluster
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.node_training import NS, cli, pods_of, sync_args

# A replica that runs until stopped, and stops at once on SIGTERM (busybox as PID 1
# would otherwise ignore it for the whole grace period).
LOOP = 'trap "exit 143" TERM; while :; do sleep 1; done'


MXGITOPS = Path(sys.executable).parent / "mxgitops"


def role(count: int, restart: str) -> dict[str, Any]:
    container = {
        "name": "mxnet",
        "image": TOOLBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", LOOP],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
    }
    spec = {"containers": [container], "terminationGracePeriodSeconds": 2}
    return {"replicas": count, "restartPolicy": restart, "template": {"spec": spec}}


def dist_job(name: str, restart: str, **run_policy: Any) -> str:
    spec: dict[str, Any] = {
        "mxReplicaSpecs": {
            "Scheduler": role(1, restart),
            "Server": role(1, restart),
            "Worker": role(2, restart),
        }
    }
    if run_policy:
        spec["runPolicy"] = run_policy
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }
    return yaml.safe_dump(doc)


PODS = 4


# A node lost takes the grace period, eviction, the sync's wait for the old pods, the
# node back and a new gang started: more than a test's default 120 s.
NODE_LOST_TIMEOUT = 420


def running(cluster: RealCluster, name: str) -> list[dict[str, Any]] | None:
    """The job's pods, once all of them run and none is being deleted."""
    pods = [p for p in pods_of(cluster, name) if not p["metadata"].get("deletionTimestamp")]
    ok = len(pods) == PODS and all(p["status"].get("phase") == "Running" for p in pods)
    return pods if ok else None


def uids(pods: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["uid"] for p in pods}


def batch_jobs(cluster: RealCluster, name: str) -> list[dict[str, Any]]:
    return [j for j in cluster.objects("jobs", NS) if j["metadata"]["name"].startswith(f"{name}-")]


def node_ready(cluster: RealCluster) -> bool | None:
    node = cluster.rest.get(f"/api/v1/nodes/{NODE_NAME}")
    conditions = node["status"].get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def node_runs_a_pod(faults: FaultCluster) -> None:
    """The node is whole again: a new pod is scheduled on it and runs."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "after-the-fault", "namespace": NS},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": TOOLBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", LOOP],
                }
            ],
            "terminationGracePeriodSeconds": 1,
        },
    }
    faults.cluster.create(body, NS)
    wait_for(
        "a new pod running on the restored node",
        lambda: (
            (faults.cluster.get("Pod", "after-the-fault", NS) or {}).get("status", {}).get("phase")
            == "Running"
        ),
        timeout=90,
    )


def synced(remote: GitRemote, faults: FaultCluster, cache: Path, name: str) -> dict[str, Any]:
    """One sync (exit 0), and its own report's row of job `name`."""
    return row_of(cli("sync", "-o", "json", *sync_args(remote, faults.cluster, cache)), name)


def noted(remote: GitRemote, cache: Path, name: str) -> dict[str, Any]:
    """Job `name`'s row of the note on the synced commit (`mxgitops status`)."""
    return row_of(
        cli("status", "--repo", remote.url, "--cache-dir", str(cache), "-o", "json"), name
    )


def row_of(output: str, name: str) -> dict[str, Any]:
    """The row of job `name` of a JSON report, after any warning lines (a note written by
    another process: the sync in the background, `mxgitops.outputs.vouching`)."""
    report, _ = json.JSONDecoder().raw_decode(output[output.index("{") :])
    (row,) = [job for job in report["jobs"] if job["name"] == name]
    return dict(row)


def start(faults: FaultCluster, remote: GitRemote, cache: Path, name: str) -> list[dict[str, Any]]:
    cli("sync", *sync_args(remote, faults.cluster, cache))
    return wait_for(f"{name}'s {PODS} pods running", lambda: running(faults.cluster, name), 120)


def running_tasks(faults: FaultCluster) -> set[str]:
    """The containers containerd runs on the node (``ctr tasks ls``)."""
    lines = faults.node.ctr("tasks", "ls").splitlines()[1:]
    return {line.split()[0] for line in lines if line.split()[-1] == "RUNNING"}
