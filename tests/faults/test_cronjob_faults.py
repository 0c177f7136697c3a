"""The CronJob's pod OOM-killed by the kernel in the middle of an apply, and its next run,
on the fault node (issue 30; the project's image is imported there too).

The CronJob is installed as a user installs it (``tests/node/test_cronjob.py``'s
overlay, suspended so that its schedule starts nothing of its own); each run is a Job
made from its jobTemplate, as the CronJob controller (or the webhook receiver) makes
it. The first run's memory limit is the test's (``LIMIT``); once that run has written
part of 40 jobs, the test makes the kernel's OOM killer end it: a ballast process
joins the run's container memory cgroup, protected from the OOM killer
(``oom_score_adj`` -1000), and allocates until the cgroup is at its limit, so the
kernel kills the one process it may, the sync (its container: ``OOMKilled``, exit 137),
and the ballast stops. The dead sync's Lease holds (600 s: the test moves its renewal
back, as the clock would); the next run takes it over and finishes the apply: every
object once, none duplicated, the note names every job with its true state.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.node import _v1_hierarchies
from tests.faults.conftest import FaultCluster
from tests.gitrepos.fixtures import GitHttpServer, GitRemote
from tests.helpers.cronjobruns import ended, kubectl
from tests.helpers.faults import (
    JOBS,
    ONE_WRITE_AT_A_TIME,
    PER_JOB,
    every_object_once,
    noted_states,
    ours,
    part_written,
    suspended_job,
)
from tests.helpers.node import (
    CRONJOB,
    NAMESPACE,
    TOKEN,
    cache_volume,
    git_secret,
    user_overlay,
)

LIMIT = "256Mi"  # the first run's memory limit, above what a sync of 40 jobs takes
# The Lease of the overlay's instance (`example`), in the run's own namespace
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/mxgitops-example"
# Joins the memory cgroup given, unkillable by the OOM killer, waits for a line on
# stdin, then fills the cgroup 1 MiB at a time until the process given is dead.
BALLAST = """
import os, sys
pid, cgroup = int(sys.argv[1]), sys.argv[2]
open("/proc/self/oom_score_adj", "w").write("-1000")
open(os.path.join(cgroup, "cgroup.procs"), "w").write(str(os.getpid()))
print("ready", flush=True)
sys.stdin.readline()

def alive():
    try:
        return open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False

held = []
while alive():
    held.append(b"x" * (1 << 20))
"""


@pytest.fixture
def installed(
    faults: FaultCluster, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> Iterator[tuple[RealCluster, GitRemote]]:
    """The user's overlay applied on the fault node, the CronJob suspended, the jobs
    repository (40 suspended dist jobs) served to its pods."""
    cluster = faults.cluster
    files = {f"jobs/job-{i:02d}.yaml": suspended_job(f"job-{i:02d}") for i in range(JOBS)}
    remote = make_git_remote("jobs", files={".mxgitops.yaml": "path: jobs\n", **files})
    server = GitHttpServer(
        root=remote.bare.parent,
        logins={("x-access-token", TOKEN)},
        host=cluster.plane.bind_address,
    )
    server.start()
    kubeconfig = cluster.plane.kubeconfig(tmp_path / "kubeconfig", user=cluster.plane.admin)
    overlay = user_overlay(tmp_path / "overlay", server.url("jobs"))
    try:
        git_secret(cluster)
        cache_volume(cluster, tmp_path / "cache-volume")
        kubectl(kubeconfig, "apply", "-k", str(overlay))
        path = f"/apis/batch/v1/namespaces/{NAMESPACE}/cronjobs/{CRONJOB}"
        cluster.rest.patch(path, {"spec": {"suspend": True}})
        yield cluster, remote
    finally:
        kubectl(kubeconfig, "delete", "-k", str(overlay), "--wait=false", "--ignore-not-found")
        cluster.raw("DELETE", "/api/v1/persistentvolumes/mxgitops-cache-node-test")
        server.stop()


def run(cluster: RealCluster, name: str, memory_limit: str | None = None) -> None:
    """A Job made from the CronJob's jobTemplate (a run); given a memory limit, the run
    a fault lands in: that limit, and one write at a time (`ONE_WRITE_AT_A_TIME`)."""
    cronjob = cluster.rest.get(f"/apis/batch/v1/namespaces/{NAMESPACE}/cronjobs/{CRONJOB}")
    spec = cronjob["spec"]["jobTemplate"]["spec"]
    if memory_limit:
        (container,) = spec["template"]["spec"]["containers"]
        container["resources"]["limits"]["memory"] = memory_limit
        container["resources"]["requests"]["memory"] = memory_limit
        container["args"] = [*container.get("args", []), *ONE_WRITE_AT_A_TIME]
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}
    cluster.create(body, NAMESPACE)


def pod_of(cluster: RealCluster, run_name: str) -> dict[str, Any] | None:
    pods = [
        p
        for p in cluster.objects("pods", NAMESPACE)
        if p["metadata"].get("labels", {}).get("job-name") == run_name
    ]
    return pods[0] if len(pods) == 1 else None


def started_pid(faults: FaultCluster, run_name: str) -> int | None:
    """The host pid of the run's container once it runs (``ctr tasks ls``)."""
    pod = pod_of(faults.cluster, run_name)
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    if not statuses or "running" not in statuses[0].get("state", {}):
        return None
    container = statuses[0]["containerID"].removeprefix("containerd://")
    for line in faults.node.ctr("tasks", "ls").splitlines()[1:]:
        if line.split()[0] == container:
            return int(line.split()[1])
    return None


def memory_cgroup(pid: int) -> Path:
    """The directory of the memory cgroup (v1) of process `pid`."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            (hierarchy,) = [h for h in _v1_hierarchies() if "memory" in h.name.split(",")]
            return hierarchy / path.lstrip("/")
    raise AssertionError(f"no memory cgroup for {pid}")


def oom_kill_mid_apply(faults: FaultCluster, pid: int) -> None:
    """Fill the sync's container memory cgroup, once part of the apply is written. The
    sync is stopped (SIGSTOP) the moment it is seen part-way, and the OOM killer kills
    it there: filling the cgroup took long enough on a busy machine for the apply to end
    first (once in a full run, all 160 batch Jobs written before the kill)."""
    ballast = subprocess.Popen(
        [sys.executable, "-c", BALLAST, str(pid), str(memory_cgroup(pid))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert ballast.stdout is not None and ballast.stdout.readline() == "ready\n"
        wait_for("the apply under way", lambda: part_written(faults.cluster), 120)
        os.kill(pid, signal.SIGSTOP)  # SIGKILL, the OOM killer's, ends a stopped process
        ballast.communicate("go\n", timeout=60)
    finally:
        if ballast.poll() is None:
            ballast.send_signal(signal.SIGKILL)
            ballast.wait()


def terminated(cluster: RealCluster, run_name: str) -> dict[str, Any] | None:
    statuses = ((pod_of(cluster, run_name) or {}).get("status") or {}).get("containerStatuses")
    return (statuses or [{}])[0].get("state", {}).get("terminated")


@pytest.mark.timeout(240)
def test_the_cronjobs_pod_oom_killed_mid_apply_is_finished_by_the_next_run(
    faults: FaultCluster, installed: tuple[RealCluster, GitRemote], tmp_path: Path
) -> None:
    cluster, remote = installed
    run(cluster, "oom-killed", memory_limit=LIMIT)
    pid = wait_for("the run's sync started", lambda: started_pid(faults, "oom-killed"), 90)
    oom_kill_mid_apply(faults, pid)
    killed = time.monotonic()
    end = wait_for("the run's container ended", lambda: terminated(cluster, "oom-killed"), 60)
    assert (end["reason"], end["exitCode"]) == ("OOMKilled", 137), end
    jobs, _ = ours(cluster)
    assert 0 < len(jobs) < JOBS * (PER_JOB - 1), len(jobs)  # ended mid-apply
    # The next run's note: Suspended where a batch Job of the job was made, else
    # Pending (its batch Jobs are made by that run, as by a first sync).
    begun = {j["metadata"]["name"][: len("job-00")] for j in jobs}
    expected = {
        f"job-{i:02d}": "Suspended" if f"job-{i:02d}" in begun else "Pending" for i in range(JOBS)
    }
    lease = cluster.rest.get(LEASE)["spec"]
    assert lease["holderIdentity"].startswith("oom-killed-"), lease  # the dead run's
    # As the clock would after the Lease's 600 s: its renewal moved back.
    cluster.rest.patch(LEASE, {"spec": {"renewTime": "2000-01-01T00:00:00.000000Z"}})

    run(cluster, "next")
    done = wait_for(
        "the next run to end",
        lambda: ended(cluster.get("Job", "next", NAMESPACE) or {}),
        120,
    )
    recovered = time.monotonic() - killed
    assert done == "Complete", cluster.get("Job", "next", NAMESPACE)
    every_object_once(cluster)
    noted = noted_states(remote, tmp_path)
    assert noted == expected, noted
    assert not cluster.rest.get(LEASE)["spec"].get("holderIdentity")  # released
    print(f"\nCronJob pod OOM-killed mid-apply: the next run converged {recovered:.1f} s after")
