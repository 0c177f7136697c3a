"""The sync itself killed in the middle of an apply, on the real parts (issue 30).

A first sync of many jobs (suspended: their batch Jobs make no pods, so the apply is
all there is) runs as a process of its own, as the CronJob's pod would; once it has
written part of them, it is SIGKILLed (its pod OOM-killed, its node lost). Then the
syncs a CronJob would run next. Asserted: the next sync writes nothing while the dead
sync's Lease holds (exit 5, naming the holder); once the Lease expired, a sync
converges to what Git says, every object once (none duplicated, none left half-made),
and the note names every job with its true state.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.faults.conftest import FaultCluster
from tests.faults.test_node_faults import MXGITOPS
from tests.gitfixtures import GitRemote
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


def repo(make_git_remote: Callable[..., GitRemote]) -> GitRemote:
    files = {f"jobs/job-{i:02d}.yaml": suspended_job(f"job-{i:02d}") for i in range(JOBS)}
    return make_git_remote("jobs", files=files)


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
    for kind, found, wanted in zip(
        ("jobs", "services"), ours(cluster), (JOBS * 4, JOBS), strict=True
    ):
        names = [o["metadata"]["name"] for o in found]
        assert len(names) == len(set(names)) == wanted, (kind, len(names), len(set(names)))
    status = cli("status", "--repo", remote.url, "--cache-dir", str(cache), "-o", "json")
    note, _ = json.JSONDecoder().raw_decode(status[status.index("{") :])
    noted = {j["name"]: j["state"] for j in note["jobs"]}
    assert noted == {f"job-{i:02d}": "Suspended" for i in range(JOBS)} | (also or {}), noted
    return report


@pytest.fixture(autouse=True)
def _no_in_cluster_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.mark.timeout(300)
def test_the_sync_sigkilled_between_writes_is_finished_by_the_next(
    faults: FaultCluster, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    remote, cache = repo(make_git_remote), tmp_path / "cache"
    sync = sync_process(remote, faults.cluster, cache)
    wait_for("the apply under way", lambda: part_written(faults.cluster), 120)
    killed = time.monotonic()
    os.killpg(sync.pid, signal.SIGKILL)  # the CronJob's pod OOM-killed, or its node lost
    sync.communicate(timeout=30)
    assert sync.returncode == -signal.SIGKILL
    # The dead sync's Lease holds for its duration: the next sync writes nothing and
    # says who holds it (exit 5).
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    held = subprocess.run(
        [str(MXGITOPS), "sync", *sync_args(remote, faults.cluster, cache)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert held.returncode == 5, held.stdout + held.stderr
    # As the clock would after the Lease's duration: its renewal moved back.
    path = "/apis/coordination.k8s.io/v1/namespaces/mxgitops/leases/mxgitops-node"
    faults.cluster.rest.patch(path, {"spec": {"renewTime": "2000-01-01T00:00:00.000000Z"}})
    converged(remote, faults.cluster, cache)
    print(f"\nsync SIGKILLed mid-apply: converged {time.monotonic() - killed:.1f} s after")
