"""kube-apiserver and etcd killed by pid under a sync, on the real control plane (issue 30).

The control plane here is one of this module's own (etcd, kube-apiserver, the
controllers and a fake kubelet): killing the shared one would break the tests that
share it. The jobs are suspended (their batch Jobs make no pods), as in
``test_sync_faults.py``, so that the apply is all there is; the sync runs as a process
of its own, as the CronJob's pod would. After each fault and the process started again, the syncs a
CronJob would run next. Asserted: the failed sync ends by itself, soon, with the exit
code of a cluster error (4) and one line saying what happened; the next syncs converge
to what Git says once the process is back, not after the dead sync's Lease had run its
600 s (each may meanwhile exit 4 or 5, no other way); every object once; the note
names every job with its true state; a job that finished before the fault is not run
again (its batch Job and pod are the ones it finished in).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.launcher import ControlPlane
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.faults import (
    JOBS,
    MXGITOPS,
    converged,
    ours,
    part_written,
    suspended_job,
    sync_process,
)
from tests.helpers.node import NS, cli, sync_args

# A failed sync must end on its own within this (the dead sync's Lease, once 600 s,
# and etcd's stalled writes, once more than 10 minutes, are what this bounds).
ENDS_WITHIN = 60.0
# From the fault to the cluster converged: the process back, the Lease expired.
CONVERGES_WITHIN = 120.0
LEASE = "/apis/coordination.k8s.io/v1/namespaces/mxgitops/leases/mxgitops-node"


@pytest.fixture(scope="module")
def faults_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """A control plane for this module's faults alone (tests/session/workergroups.py: the fault
    suite's worker)."""
    directory = tmp_path_factory.mktemp("cpfaults")
    with (
        ControlPlane(directory) as plane,
        RealCluster(plane, directory / "kubeconfig") as real,  # a fake kubelet
    ):
        yield real


@pytest.fixture
def plane(faults_plane: RealCluster, monkeypatch: pytest.MonkeyPatch) -> RealCluster:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    faults_plane.wipe()
    return faults_plane


def ended(sync: subprocess.Popen[str]) -> str:
    """The failed sync's output, once it ended by itself within ENDS_WITHIN."""
    try:
        out, _ = sync.communicate(timeout=ENDS_WITHIN)
    except subprocess.TimeoutExpired:
        os.killpg(sync.pid, signal.SIGKILL)
        out, _ = sync.communicate()
        pytest.fail(f"the sync had not ended {ENDS_WITHIN:.0f} s after the fault:\n{out[-3000:]}")
    assert sync.returncode == 4, out[-3000:]  # a cluster error, as the CLI maps it
    print(f"\n{out.strip().splitlines()[-1]}")
    return out


FINISHED = "finished"


def finished_before(
    cluster: RealCluster, make_git_remote: Callable[..., GitRemote], cache: Path
) -> tuple[GitRemote, set[str]]:
    """A repository whose one job ran and finished (Succeeded, in the ledger), then the
    many suspended jobs pushed; the uids of that job's batch Job and pod."""
    job = yaml.safe_load(suspended_job(FINISHED))
    job["spec"] = {"mxReplicaSpecs": {"Worker": job["spec"]["mxReplicaSpecs"]["Worker"]}}
    job["spec"]["mxReplicaSpecs"]["Worker"]["replicas"] = 1
    remote = make_git_remote("jobs", files={f"jobs/{FINISHED}.yaml": yaml.safe_dump(job)})
    cli("sync", *sync_args(remote, cluster, cache))
    (batch,) = of_finished(cluster, "jobs")
    cluster.run_job_controller(NS)  # its pod made and bound
    cluster.kubelet(job=batch["metadata"]["name"], namespace=NS, phase="Succeeded")
    cli("sync", *sync_args(remote, cluster, cache))  # the ledger records it finished
    remote.commit({f"jobs/job-{i:02d}.yaml": suspended_job(f"job-{i:02d}") for i in range(JOBS)})
    remote.push()
    return remote, uids(cluster)


def of_finished(cluster: RealCluster, kind: str) -> list[dict[str, Any]]:
    return [o for o in cluster.objects(kind, NS) if o["metadata"]["name"].startswith(FINISHED)]


def uids(cluster: RealCluster) -> set[str]:
    return {o["metadata"]["uid"] for kind in ("jobs", "pods") for o in of_finished(cluster, kind)}


def converge(
    remote: GitRemote, cluster: RealCluster, cache: Path, fault: float, ran: set[str]
) -> float:
    """Run the syncs a CronJob would, one after the other, until one writes and exits
    0; each before it may only exit 4 (the API not back yet) or 5 (the dead sync's
    Lease). Then `converged` proves the state, the finished job not run again (`ran`:
    the uids of its batch Job and pod). Seconds from the fault."""
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    while True:
        run = subprocess.run(
            [str(MXGITOPS), "sync", *sync_args(remote, cluster, cache)],
            capture_output=True,
            text=True,
            env=env,
        )
        if run.returncode == 0:
            break
        assert run.returncode in (4, 5), run.stdout + run.stderr
        waited = time.monotonic() - fault
        assert waited < CONVERGES_WITHIN, f"not converged {waited:.0f} s after: {run.stderr}"
    took = time.monotonic() - fault
    converged(remote, cluster, cache, also={FINISHED: "Succeeded"})
    assert uids(cluster) == ran  # neither re-created nor run again
    lease = cluster.rest.get(LEASE)
    assert not lease["spec"].get("holderIdentity"), lease  # released by the last sync
    return took


def apiserver_ready(cluster: RealCluster) -> bool:
    try:
        return cluster.rest.get_or_none("/api/v1/namespaces/default") is not None
    except Exception:  # etcd not back yet: the API server answers 5xx or not at all
        return False


@contextmanager
def killed(cluster: RealCluster, process: str) -> Iterator[float]:
    """`process` SIGKILLed by its pid for the block (given the moment of the fault), then
    started again with the same flags and data, whatever the block did."""
    fault = time.monotonic()
    cluster.plane.kill(process)
    try:
        yield fault
    finally:
        cluster.plane.restart(process)  # kube-apiserver: until it is ready
        wait_for("the API server to reach etcd", lambda: apiserver_ready(cluster), 60)


def killed_mid_apply(
    cluster: RealCluster, make_git_remote: Callable[..., GitRemote], cache: Path, process: str
) -> float:
    """A sync of many new jobs, stopped (SIGSTOP) once part is written, `process`
    SIGKILLed under it, the sync let go on and `process` kept down until the sync ended
    (it must, by itself: `ended`); then the syncs after it. The seconds from the fault
    to converged."""
    remote, ran = finished_before(cluster, make_git_remote, cache)
    sync = sync_process(remote, cluster, cache)
    wait_for("the apply under way", lambda: part_written(cluster), 120)
    os.killpg(sync.pid, signal.SIGSTOP)  # held part-way until the fault is there
    with killed(cluster, process) as fault:
        os.killpg(sync.pid, signal.SIGCONT)
        out = ended(sync)
        took = time.monotonic() - fault
        print(f"\n{process} SIGKILLed mid-apply: the sync ended {took:.1f} s after")
        assert "lost the Lease" in out, out[-3000:]
    return converge(remote, cluster, cache, fault, ran)


@pytest.mark.timeout(300)
def test_the_kube_apiserver_killed_mid_apply(
    plane: RealCluster, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    took = killed_mid_apply(plane, make_git_remote, tmp_path / "cache", "kube-apiserver")
    print(f"kube-apiserver SIGKILLed mid-apply: converged {took:.1f} s after")


@pytest.mark.timeout(300)
def test_etcd_killed_mid_apply(
    plane: RealCluster, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    took = killed_mid_apply(plane, make_git_remote, tmp_path / "cache", "etcd")
    print(f"etcd SIGKILLed mid-apply: converged {took:.1f} s after")


def connected(pid: int, port: int) -> bool:
    """Whether process `pid` has a TCP connection established to `port` (ss, iproute2)."""
    listed = subprocess.run(
        ["ss", "-Htnp", "state", "established", "dport", "=", f":{port}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return f"pid={pid}," in listed.stdout


@pytest.mark.timeout(300)
def test_the_kube_apiserver_killed_mid_list(
    plane: RealCluster, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    """The sync's first read (the LIST of its ConfigMaps) in flight when the server dies:
    the server is stopped (SIGSTOP) before the sync starts, so that its LIST waits on an
    open connection, then SIGKILLed."""
    cache = tmp_path / "cache"
    remote, ran = finished_before(plane, make_git_remote, cache)
    server = plane.plane.processes["kube-apiserver"]
    port = int(plane.url.rsplit(":", 1)[1])
    os.kill(server.pid, signal.SIGSTOP)
    sync = sync_process(remote, plane, cache)
    try:
        wait_for("the sync's first LIST", lambda: connected(sync.pid, port), 60)
    finally:  # SIGKILLed, stopped as it is, and started again whatever happened
        with killed(plane, "kube-apiserver") as fault:
            out = ended(sync)
    assert "cannot reach the Kubernetes API" in out, out[-3000:]
    # It wrote nothing, not even the Lease (left as the last sync released it).
    assert ours(plane) == ([], []) and not plane.rest.get(LEASE)["spec"].get("holderIdentity")
    took = converge(remote, plane, cache, fault, ran)
    print(f"kube-apiserver SIGKILLed mid-LIST: converged {took:.1f} s after")
