"""A queued distributed MXNet job synced against a Kueue MultiKueue manager trains on its
worker's real node.

``multikueue_node``: a manager and one worker, each a real control plane with the real
JobSet v0.11.0 and Kueue v0.17.0, the worker's node real (kubelet, containerd, runc,
CNI, kube-proxy, CoreDNS; the training image imported). A jobs repository holds one
Kubeflow ``MXJob`` (1 scheduler, 2 servers, 3 workers of the training image) naming
the LocalQueue; ``mxgitops sync`` is given the manager's kubeconfig only. Kueue
dispatches the JobSet to the worker, where ps-lite's ``dist_sync`` kvstore trains; the
workers' logs, read on the worker (the manager has no pod), hold their results, and
``mxgitops status`` and the note say Succeeded on cluster worker-a.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.controlplane.harness import wait_for
from tests.ecosystem.multikueue import LOCAL_QUEUE, MultiKueue
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.node import (
    NS,
    RESULT,
    ROLES,
    TRAIN_TIMEOUT,
    LogFollower,
    cli,
    condition,
    container_started,
    job_state,
    queued_mxjob,
    role_of,
    sync_args,
)

# The module's one test also starts the clusters and the real node.
pytestmark = pytest.mark.timeout(600)


def test_a_queued_dist_job_synced_against_the_manager_trains_on_the_workers_real_node(
    multikueue_node: MultiKueue,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    manager, (worker,) = multikueue_node.manager, multikueue_node.workers
    job = queued_mxjob("linreg", queue=LOCAL_QUEUE)
    remote = make_git_remote("jobs", files={"jobs/linreg.yaml": job})
    cache = tmp_path / "cache"
    started = time.monotonic()
    cli("sync", *sync_args(remote, manager.real, cache))
    (jobset,) = manager.eco.jobsets(NS)
    name = jobset["metadata"]["name"]
    wait_for("the JobSet on worker-a", lambda: worker.eco.jobsets(NS) or None, timeout=60)
    dispatched = time.monotonic() - started

    followed = LogFollower(worker.real)

    def six_started() -> bool:
        pods = worker.eco.pods(name, NS)
        for pod in pods:
            if role_of(pod) == "worker" and container_started(pod):
                followed.follow(pod["metadata"]["name"])
            if pod["status"].get("phase") == "Failed":
                raise AssertionError(f"{pod['metadata']['name']} failed: {pod['status']}")
        return sum(1 for p in pods if container_started(p)) == sum(ROLES.values())

    wait_for("the six pods to start on worker-a", six_started, timeout=TRAIN_TIMEOUT)
    workers = sorted(
        p["metadata"]["name"] for p in worker.eco.pods(name, NS) if role_of(p) == "worker"
    )
    assert manager.eco.pods(name, NS) == []  # nothing runs on the manager
    wait_for(
        "the manager's JobSet to complete, as mirrored from worker-a",
        lambda: condition(manager.eco.jobsets(NS)[0], "Completed") or None,
        timeout=TRAIN_TIMEOUT,
    )
    trained = time.monotonic() - started
    wait_for("the workers' logs to end", lambda: all(followed.done(w) for w in workers), 30)
    results = []
    for pod in workers:
        text = followed.texts.get(pod, "")
        print(f"{pod} (on worker-a):\n{text}")
        lines = [line for line in text.splitlines() if line.startswith(RESULT)]
        assert lines, f"no training result in {pod}'s log ({followed.errors.get(pod)}):\n{text}"
        results.append(json.loads(lines[-1].removeprefix(RESULT)))
    assert sorted(r["rank"] for r in results) == [0, 1, 2]
    for result in results:
        assert result["kvstore"] == "dist_sync" and result["workers"] == 3, result
        assert result["loss_after"] < result["loss_before"] / 100, result
    assert len({tuple(r["weights"]) for r in results}) == 1, results

    cli("sync", *sync_args(remote, manager.real, cache))  # the note records the end state
    state = job_state(remote, cache, "linreg")
    assert (state["state"], state["placement"]) == ("Succeeded", worker.name), state
    note = remote.note(remote.rev()) or ""
    assert f"default/linreg: succeeded on cluster {worker.name}" in note, note
    assert worker.real.request_log == []  # mxgitops never spoke to the worker
    print(
        f"dispatched to {worker.name} {dispatched:.1f} s after the sync began; trained and "
        f"mirrored Completed at {trained:.1f} s; Succeeded at {time.monotonic() - started:.1f} s"
    )
