"""The fault suite's shared steps (tests/faults/): jobs running on the fault node, syncs
cut part-way, preemption, and the checks that a fault left the node usable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.images import TOOLBOX_IMAGE
from tests.controlplane.node import NODE_NAME
from tests.ecosystem.fixtures import Ecosystem
from tests.faults.conftest import FaultCluster
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.node import NS, cli, pods_of, sync_args

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


HIGH = "mxgitops-fault-high"


def allocatable_millicpu(cluster: RealCluster) -> int:
    cpu = str(cluster.rest.get(f"/api/v1/nodes/{NODE_NAME}")["status"]["allocatable"]["cpu"])
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


def sized_job(cluster: RealCluster, name: str) -> str:
    """A dist job (`Never`, `backoffLimit: 0`) whose 4 pods take 60 % of the node's CPU."""
    doc = yaml.safe_load(dist_job(name, "Never", backoffLimit=0))
    share = f"{allocatable_millicpu(cluster) * 15 // 100}m"
    for role in doc["spec"]["mxReplicaSpecs"].values():
        (container,) = role["template"]["spec"]["containers"]
        container["resources"]["requests"]["cpu"] = share
    return yaml.safe_dump(doc)


@pytest.fixture
def high_priority(faults: FaultCluster) -> Iterator[str]:
    """A PriorityClass above every job's (none names one: priority 0)."""
    path = "/apis/scheduling.k8s.io/v1/priorityclasses"
    faults.cluster.rest.create(
        path,
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": HIGH},
            "value": 1000000,
        },
    )
    yield HIGH
    faults.cluster.raw("DELETE", f"{path}/{HIGH}")


def preemptor(cluster: RealCluster) -> dict[str, Any]:
    """A pod of the higher priority that needs half the node: it fits only once a pod of
    the job is preempted. It runs a moment and ends, giving the node back."""
    cpu = f"{allocatable_millicpu(cluster) // 2}m"
    container = {
        "name": "c",
        "image": TOOLBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", "sleep 1"],
        "resources": {"requests": {"cpu": cpu}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "preemptor", "namespace": NS},
        "spec": {
            "priorityClassName": HIGH,
            "restartPolicy": "Never",
            "containers": [container],
            "terminationGracePeriodSeconds": 1,
        },
    }


def preempt(cluster: RealCluster) -> None:
    """Create the higher pod and wait until it ran (so a pod of the job was preempted)."""
    cluster.create(preemptor(cluster), NS)
    wait_for(
        "the preemptor to run and end",
        lambda: (
            (cluster.get("Pod", "preemptor", NS) or {}).get("status", {}).get("phase")
            == "Succeeded"
        ),
        90,
    )


@pytest.fixture(scope="module")
def fault_jobset(
    fault_node: FaultCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ecosystem]:
    """The real JobSet controller beside the fault node's control plane (no Kueue)."""
    from tests.ecosystem.addons import Ecosystem as Controllers

    controllers = Controllers(fault_node.cluster.plane, tmp_path_factory.mktemp("fault-jobset"))
    controllers.start(kueue=False)
    try:
        eco = Ecosystem(fault_node.cluster)
        yield eco
    finally:
        controllers.uninstall()


def the_jobset(eco: Ecosystem, name: str) -> dict[str, Any]:
    (jobset,) = [j for j in eco.jobsets(NS) if j["metadata"]["name"].startswith(f"{name}-")]
    return jobset


def gang_running(eco: Ecosystem, jobset: str) -> list[dict[str, Any]] | None:
    pods = [p for p in eco.pods(jobset, NS) if not p["metadata"].get("deletionTimestamp")]
    ok = len(pods) == PODS and all(p["status"].get("phase") == "Running" for p in pods)
    return pods if ok else None


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


# The syncs a fault lands in write one object at a time: at the default 16 in flight an
# apply of 200 objects could end between a look that found it part-way and the fault
# (the writes already sent still land), so that the fault hit a finished apply.
ONE_WRITE_AT_A_TIME = ("--parallelism", "1")


def sync_process(remote: GitRemote, cluster: RealCluster, cache: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    return subprocess.Popen(
        [str(MXGITOPS), "sync", *ONE_WRITE_AT_A_TIME, *sync_args(remote, cluster, cache)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


def part_written(cluster: RealCluster) -> bool | None:
    """Some of the jobs' batch Jobs exist, at most half of them: the apply is under way,
    with a hundred writes or more left (one at a time) for the fault to land in."""
    jobs = [j for j in cluster.objects("jobs", NS) if j["metadata"]["name"].startswith("job-")]
    return 0 < len(jobs) <= JOBS * (PER_JOB - 1) // 2 or None


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
