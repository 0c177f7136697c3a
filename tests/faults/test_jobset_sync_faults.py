"""The sync SIGKILLed in the middle of an apply of JobSets, on the real control plane
with the real JobSet controller (issue 30; the batch runtime's case:
``test_sync_faults.py``).

Forty suspended dist jobs on the JobSet runtime: the apply is forty JobSets, written one
at a time. Once part of them (at most half) are written, the sync is SIGKILLed.
Asserted: the next sync writes nothing while the dead sync's Lease holds (exit 5); once
it expired, a sync converges, every JobSet once, and the note names every job Suspended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.controlplane.harness import wait_for
from tests.ecosystem.fixtures import Ecosystem
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.faults import JOBS, MXGITOPS, ONE_WRITE_AT_A_TIME, noted_states, suspended_job
from tests.helpers.node import NS, cli, sync_args

LEASE = "/apis/coordination.k8s.io/v1/namespaces/mxgitops/leases/mxgitops-node"


def jobset_sync_args(remote: GitRemote, ecosystem: Ecosystem, cache: Path) -> list[str]:
    return [*sync_args(remote, ecosystem.real, cache), "--default-runtime", "jobset"]


def jobset_names(ecosystem: Ecosystem) -> list[str]:
    return [j["metadata"]["name"] for j in ecosystem.jobsets(NS)]


@pytest.fixture(autouse=True)
def _no_in_cluster_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.mark.timeout(300)
def test_the_sync_sigkilled_mid_apply_of_jobsets_is_finished_by_the_next(
    ecosystem: Ecosystem, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    files = {f"jobs/job-{i:02d}.yaml": suspended_job(f"job-{i:02d}") for i in range(JOBS)}
    remote, cache = make_git_remote("jobs", files=files), tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    command = [str(MXGITOPS), "sync", *jobset_sync_args(remote, ecosystem, cache)]
    sync = subprocess.Popen(
        [*command, *ONE_WRITE_AT_A_TIME],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    wait_for("the apply under way", lambda: 0 < len(jobset_names(ecosystem)) <= JOBS // 2 or None)
    os.killpg(sync.pid, signal.SIGKILL)  # the CronJob's pod OOM-killed, or its node lost
    sync.communicate(timeout=30)
    assert sync.returncode == -signal.SIGKILL
    written = len(jobset_names(ecosystem))
    assert 0 < written < JOBS, written
    held = subprocess.run(command, capture_output=True, text=True, env=env)
    assert held.returncode == 5, held.stdout + held.stderr
    assert len(jobset_names(ecosystem)) == written  # nothing written meanwhile
    # As the clock would after the Lease's duration: its renewal moved back.
    ecosystem.real.rest.patch(LEASE, {"spec": {"renewTime": "2000-01-01T00:00:00.000000Z"}})
    cli("sync", *jobset_sync_args(remote, ecosystem, cache))
    out = cli("sync", "-o", "json", *jobset_sync_args(remote, ecosystem, cache))
    report, _ = json.JSONDecoder().raw_decode(out[out.index("{") :])
    actions = {j["name"]: j["action"] for j in report["jobs"]}
    assert set(actions.values()) == {"unchanged"}, actions
    names = jobset_names(ecosystem)
    assert len(names) == len(set(names)) == JOBS, sorted(names)
    noted = noted_states(remote, cache)
    assert noted == {f"job-{i:02d}": "Suspended" for i in range(JOBS)}, noted
