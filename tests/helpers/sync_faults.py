"""Helpers of `test_sync_faults.py` that other test modules use too."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.controlplane.harness import RealCluster
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.node_faults import MXGITOPS
from tests.helpers.node_training import NS, cli, sync_args

JOBS = 40  # dist jobs of 4 batch Jobs and a Service each: an apply of 200 objects


PER_JOB = 5


def suspended_job(name: str) -> str:
    container = {"name": "mxnet", "image": "localhost/mxgitops/toolbox:1"}
    replica = {"template": {"spec": {"containers": [container]}}}
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "runPolicy": {"suspend": True},
            "mxReplicaSpecs": {
                "Scheduler": dict(replica),
                "Server": dict(replica),
                "Worker": {**replica, "replicas": 2},
            },
        },
    }
    return yaml.safe_dump(doc)


def ours(cluster: RealCluster) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    jobs = [j for j in cluster.objects("jobs", NS) if j["metadata"]["name"].startswith("job-")]
    services = [
        s for s in cluster.objects("services", NS) if s["metadata"]["name"].startswith("job-")
    ]
    return jobs, services


def sync_process(remote: GitRemote, cluster: RealCluster, cache: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    return subprocess.Popen(
        [str(MXGITOPS), "sync", *sync_args(remote, cluster, cache)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


def part_written(cluster: RealCluster) -> bool | None:
    """Some of the jobs' objects exist, not all: the apply is under way."""
    jobs, _ = ours(cluster)
    return 0 < len(jobs) < JOBS * (PER_JOB - 1) or None


def converged(
    remote: GitRemote, cluster: RealCluster, cache: Path, also: dict[str, str] | None = None
) -> Any:
    """Sync until a sync writes nothing; assert every object once; the note's jobs (and
    the states of the jobs `also` names)."""
    cli("sync", *sync_args(remote, cluster, cache))
    out = cli("sync", "-o", "json", *sync_args(remote, cluster, cache))
    report, _ = json.JSONDecoder().raw_decode(out[out.index("{") :])
    actions = {j["name"]: j["action"] for j in report["jobs"]}
    assert set(actions.values()) == {"unchanged"}, actions
    every_object_once(cluster)
    noted = noted_states(remote, cache)
    assert noted == {f"job-{i:02d}": "Suspended" for i in range(JOBS)} | (also or {}), noted
    return report


def every_object_once(cluster: RealCluster) -> None:
    """Each job's batch Jobs and Service exist, none twice."""
    for kind, found, wanted in zip(
        ("jobs", "services"), ours(cluster), (JOBS * 4, JOBS), strict=True
    ):
        names = [o["metadata"]["name"] for o in found]
        assert len(names) == len(set(names)) == wanted, (kind, len(names), len(set(names)))


def noted_states(remote: GitRemote, cache: Path) -> dict[str, str]:
    """The state of each job, as the note on the repository's head says."""
    status = cli("status", "--repo", remote.url, "--cache-dir", str(cache), "-o", "json")
    note, _ = json.JSONDecoder().raw_decode(status[status.index("{") :])
    return {j["name"]: j["state"] for j in note["jobs"]}
