"""A queued distributed MXNet job trains under JobSet and Kueue on the real node.

The real JobSet controller (v0.11.0) and Kueue controller manager (v0.17.0) run against
the real node's control plane (``node_ecosystem``: their CRDs and webhooks installed, the
webhooks served on loopback, not disabled). A jobs repository holds one Kubeflow
``MXJob`` (1 scheduler, 2 servers, 3 workers of the training image,
``tests/controlplane/training/train.py``) that names a LocalQueue; ``mxgitops sync``
creates its one JobSet, suspended; Kueue admits it whole against a ClusterQueue's CPU
and memory quota; JobSet makes the child Jobs, whose pods run real containers; the
workers reach the scheduler at its pod's DNS name (JobSet's headless Service of
``network.subdomain``, resolved by CoreDNS: no ClusterIP Service exists) and ps-lite's
``dist_sync`` kvstore trains a linear model.

The test fails unless every worker's log holds its training result with the loss fallen
and the weights equal across workers, the JobSet completes, and ``mxgitops status`` and
the note say Succeeded. The workers' logs are followed while they run: once the scheduler
succeeds, JobSet deletes the child Jobs still active (in the foreground, so their pods
and logs go with them), and the workers end at the same moment as the scheduler.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mxgitops.runtimes.jobset.render import scheduler_address
from tests.controlplane.harness import RealCluster, wait_for
from tests.ecosystem.fixtures import Ecosystem
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.node import (
    NS,
    QUEUE,
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

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "mxnet"]
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


# JobSet's and Kueue's start, six pods' images, a training and the controllers' stop:
# 150 s in a run beside three other test sessions, over the default 120 s.
@pytest.mark.timeout(300)
def test_a_queued_dist_job_trains_under_jobset_and_kueue_and_succeeds(
    node_cluster: RealCluster,
    node_ecosystem: Ecosystem,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    eco = node_ecosystem
    # room for the job's six pods (10m CPU and 64 MiB each), in the cluster's one queue
    eco.queue(QUEUE, NS, {"cpu": "1", "memory": "1Gi"})
    remote = make_git_remote("jobs", files={"jobs/linreg.yaml": queued_mxjob("linreg")})
    cache = tmp_path / "cache"
    started = time.monotonic()
    cli("sync", *sync_args(remote, node_cluster, cache))

    (jobset,) = eco.jobsets(NS)
    name = jobset["metadata"]["name"]
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == QUEUE
    assert jobset["spec"]["replicatedJobs"][0]["name"] == "scheduler"

    def admitted() -> dict[str, Any] | None:
        for workload in eco.workloads(NS):
            owners = workload["metadata"].get("ownerReferences") or []
            if any(o["name"] == name for o in owners) and condition(workload, "Admitted"):
                return workload
        return None

    workload = wait_for("Kueue to admit linreg's Workload", admitted, timeout=60)
    admitted_at = time.monotonic() - started
    assignments = workload["status"]["admission"]["podSetAssignments"]
    assert {a["name"]: a["count"] for a in assignments} == ROLES  # whole: all six pods

    followed = LogFollower(node_cluster)

    def six_pods_started() -> list[dict[str, Any]] | None:
        pods = eco.pods(name, NS)
        for pod in pods:
            if role_of(pod) == "worker" and container_started(pod):
                followed.follow(pod["metadata"]["name"])
            if pod["status"].get("phase") == "Failed":
                raise AssertionError(f"{pod['metadata']['name']} failed: {pod['status']}")
        started_pods = [p for p in pods if container_started(p)]
        return started_pods if len(started_pods) == sum(ROLES.values()) else None

    pods = wait_for("the six pods of linreg to start", six_pods_started, timeout=TRAIN_TIMEOUT)
    # none of them before Kueue admitted the Workload (admission is all or nothing)
    when = condition(workload, "Admitted")
    assert when is not None
    assert all(p["metadata"]["creationTimestamp"] >= when["lastTransitionTime"] for p in pods)
    assert {role: sum(1 for p in pods if role_of(p) == role) for role in ROLES} == ROLES
    # Every replica was told the scheduler's pod DNS name; no ClusterIP Service was made:
    # the only Service is JobSet's headless one, named by network.subdomain.
    address = scheduler_address(name)
    assert {env_of(p)["DMLC_PS_ROOT_URI"] for p in pods} == {address}
    (scheduler,) = [p for p in pods if role_of(p) == "scheduler"]
    assert f"{scheduler['spec']['hostname']}.{scheduler['spec']['subdomain']}" == address
    services = node_cluster.objects("services", NS)
    assert [(s["metadata"]["name"], s["spec"].get("clusterIP")) for s in services] == [
        (name, "None")
    ]

    def completed() -> dict[str, Any] | None:
        (found,) = eco.jobsets(NS)
        if condition(found, "Failed"):
            raise AssertionError(f"linreg's JobSet failed: {found['status']}\n{logs()}")
        return found if condition(found, "Completed") else None

    def logs() -> str:
        return "\n".join(f"--- {pod}\n{text}" for pod, text in sorted(followed.texts.items()))

    wait_for("linreg's JobSet to complete", completed, timeout=TRAIN_TIMEOUT)
    trained = time.monotonic() - started
    workers = sorted(p["metadata"]["name"] for p in pods if role_of(p) == "worker")
    wait_for(
        "the workers' logs to end",
        lambda: all(followed.done(w) for w in workers) or None,
        timeout=30,
    )
    results = []
    for worker in workers:
        text = followed.texts.get(worker, "")
        print(f"{worker}:\n{text}")
        lines = [line for line in text.splitlines() if line.startswith(RESULT)]
        assert lines, (
            f"no training result in {worker}'s log ({followed.errors.get(worker)}):\n{text}"
        )
        results.append(json.loads(lines[-1].removeprefix(RESULT)))
    assert sorted(r["rank"] for r in results) == [0, 1, 2]
    for result in results:
        assert result["kvstore"] == "dist_sync" and result["workers"] == 3, result
        assert result["loss_after"] < result["loss_before"] / 100, result
    assert len({tuple(r["weights"]) for r in results}) == 1, results  # one model, not three

    cli("sync", *sync_args(remote, node_cluster, cache))  # the note records the end state
    state = job_state(remote, cache, "linreg")
    assert state["state"] == "Succeeded", state
    note = remote.note(remote.rev())
    assert note is not None and "linreg" in note and "Succeeded" in note, note
    print(
        f"queued dist job: admitted by Kueue {admitted_at:.1f} s after the sync began, "
        f"trained and completed in {trained:.1f} s, "
        f"status Succeeded at {time.monotonic() - started:.1f} s"
    )
