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

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.controlplane.harness import wait_for
from tests.faults.conftest import FaultCluster
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.faults import (
    JOBS,
    MXGITOPS,
    converged,
    part_written,
    suspended_job,
    sync_process,
)
from tests.helpers.node import sync_args


def repo(make_git_remote: Callable[..., GitRemote]) -> GitRemote:
    files = {f"jobs/job-{i:02d}.yaml": suspended_job(f"job-{i:02d}") for i in range(JOBS)}
    return make_git_remote("jobs", files=files)


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
