"""The same pod outcomes driven through both, Kubeflow's training operator and mxgitops,
through the fake kubelet of the real control plane: after each step the MXJob's
condition and mxgitops' state (a dry-run sync) are compared, and at the end a sync.

Each step says what the operator does, and the test waits for the operator to say
it (a measurement: a step the operator does not take fails here, with what it said
instead). mxgitops must say the same, or the step names the row of the manual's
table of differences kept on purpose that says why not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.helpers.sync import NS, Syncer, batch_job, canary, job_objects, states, summary_of
from tests.kubeflow.differences import KEPT
from tests.kubeflow.operator import MXJOBS

# The MXJob's newest true condition, as mxgitops names the state it means.
CONDITIONS = {
    "Created": "Pending",
    "Running": "Running",
    "Restarting": "Running",
    "Succeeded": "Succeeded",
    "Failed": "Failed",
}


@dataclass(frozen=True)
class Step:
    """Move the newest pod of replica (`role`, `index`) as the kubelet would, on both."""

    role: str
    index: int
    how: dict[str, Any]
    operator: str  # the state the operator's MXJob reaches
    kept: str = ""  # the manual's row id when mxgitops' state differs
    mxgitops: str = ""  # mxgitops' state then (kept only)


@dataclass(frozen=True)
class Scenario:
    name: str
    restart: str
    steps: tuple[Step, ...]
    servers: int = 0  # 0: a local job
    workers: int = 1
    backoff_limit: int | None = None
    after_sync: str = ""  # mxgitops' action of the last, real sync
    extra: dict[str, Any] = field(default_factory=dict)
    sidecar: bool = False  # a second container, `monitor`


RUN = {"phase": "Running"}
EXIT_0 = {"phase": "Succeeded"}
EXIT_1 = {"phase": "Failed", "exit_code": 1}
EXIT_1_MESSAGE = {"phase": "Failed", "exit_code": 1, "message": "loss is NaN"}
EXIT_3 = {"phase": "Failed", "exit_code": 3}
KILLED = {"phase": "Failed", "exit_code": 137}
OOM = {"phase": "Failed", "exit_code": 137, "reason": "OOMKilled"}
RESTART_1 = {"phase": "Failed", "exit_code": 1, "restart_state": "running"}
# Long before any other finish: the kubelet writes whole seconds, and a success and a
# failure in the same second are not known apart (mxgitops/trainer/finishing.py).
EXIT_0_BEFORE = {"phase": "Succeeded", "finished_at": "2000-01-01T00:00:00Z"}
SIDECAR_FAILED = {"phase": "Failed", "container": "monitor", "exit_code": 1}

SIDECAR = {"name": "monitor", "image": "busybox", "args": ["sleep", "infinity"]}
SCENARIOS = [
    Scenario("never-exit-0", "Never", (Step("worker", 0, EXIT_0, "Succeeded"),)),
    Scenario("never-exit-1", "Never", (Step("worker", 0, EXIT_1, "Failed"),)),
    Scenario("never-message", "Never", (Step("worker", 0, EXIT_1_MESSAGE, "Failed"),)),
    Scenario("never-oom", "Never", (Step("worker", 0, OOM, "Failed"),)),
    Scenario(
        "never-dist-worker-exit-1",
        "Never",
        (Step("worker", 1, EXIT_1, "Failed"),),
        servers=1,
        workers=2,
        after_sync="stop",  # the operator leaves the others running: finished-stops
    ),
    Scenario(
        "never-dist-scheduler-done",
        "Never",
        (Step("scheduler", 0, EXIT_0, "Succeeded"),),
        servers=1,
        workers=2,
        after_sync="stop",
    ),
    Scenario(
        "never-dist-scheduler-then-server",
        "Never",
        (
            Step("scheduler", 0, EXIT_0_BEFORE, "Succeeded"),
            Step("server", 0, EXIT_1, "Succeeded"),  # the operator's MXJob stays Succeeded
        ),
        servers=1,
        workers=1,
        after_sync="stop",
    ),
    Scenario(
        "never-dist-server-killed",
        "Never",
        (Step("server", 0, KILLED, "Failed"),),
        servers=1,
        workers=2,
        after_sync="stop",
    ),
    Scenario(
        "exit-code-dist-permanent",
        "ExitCode",
        (Step("worker", 1, EXIT_1_MESSAGE, "Failed"),),
        servers=1,
        workers=2,
        after_sync="stop",
    ),
    Scenario("on-failure-restart", "OnFailure", (Step("worker", 0, RESTART_1, "Running"),)),
    Scenario(
        "on-failure-no-limit",
        "OnFailure",
        tuple(Step("worker", 0, RESTART_1, "Running") for _ in range(7)),
    ),
    Scenario(
        "on-failure-backoff-1",
        "OnFailure",
        (Step("worker", 0, RESTART_1, "Failed"),),
        backoff_limit=1,
    ),
    Scenario(
        "on-failure-backoff-job-wide",
        "OnFailure",
        (Step("worker", 0, RESTART_1, "Running"), Step("worker", 1, RESTART_1, "Failed")),
        servers=1,
        workers=2,
        backoff_limit=2,
        after_sync="stop",
    ),
    Scenario(
        "exit-code-killed",
        "ExitCode",
        (
            Step("worker", 0, KILLED, "Running"),
            Step("worker", 0, RUN, "Running"),
        ),
    ),
    Scenario(
        "exit-code-oom",
        "ExitCode",
        (
            Step("worker", 0, OOM, "Running"),
            Step("worker", 0, RUN, "Running"),
        ),
    ),
    Scenario(
        "exit-code-permanent",
        "ExitCode",
        (Step("worker", 0, EXIT_3, "Failed"),),
    ),
    Scenario(
        "exit-code-sidecar-failed",
        "ExitCode",
        (Step("worker", 0, SIDECAR_FAILED, "Failed"),),  # mxnet exited 0: not retried
        sidecar=True,
    ),
    Scenario(
        "exit-code-backoff",
        "ExitCode",
        (
            Step("worker", 0, KILLED, "Running"),
            Step("worker", 0, RUN, "Running"),
            Step("worker", 0, KILLED, "Running", "exit-code-backoff", "Failed"),
        ),
        backoff_limit=1,
    ),
]


def manifest(scenario: Scenario) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        container = {"name": "mxnet", "image": "mxnet/python:1.9.1", "command": ["python"]}
        containers = [container, *([SIDECAR] if scenario.sidecar else [])]
        return {
            "replicas": count,
            "restartPolicy": scenario.restart,
            "template": {"spec": {"containers": containers}},
        }

    replicas = {"Worker": replica(scenario.workers)}
    if scenario.servers:
        replicas = {"Scheduler": replica(1), "Server": replica(scenario.servers), **replicas}
    spec: dict[str, Any] = {"jobMode": "MXTrain", "mxReplicaSpecs": replicas}
    if scenario.backoff_limit is not None:
        spec["runPolicy"] = {"backoffLimit": scenario.backoff_limit}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": scenario.name, "namespace": NS},
        "spec": spec,
    }


def operator_state(cluster: RealCluster, name: str) -> str:
    job = cluster.rest.get(f"{MXJOBS.format(namespace=NS)}/{name}")
    true = [
        c["type"]
        for c in (job.get("status") or {}).get("conditions") or []
        if c["status"] == "True"
    ]
    return CONDITIONS.get(true[-1], true[-1]) if true else "Pending"


def operator_pod(cluster: RealCluster, name: str, role: str, index: int) -> dict[str, Any]:
    """The operator's pod of a replica once it exists and has not finished (it makes a
    new one, of the same name, for a retried failure)."""
    pod_name = f"{name}-{role}-{index}"

    def current() -> dict[str, Any] | None:
        pod = cluster.rest.get_or_none(f"/api/v1/namespaces/{NS}/pods/{pod_name}")
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return None
        return (
            pod if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") else None
        )

    return wait_for(f"for the operator's pod {pod_name}", current)


def start(cluster: RealCluster, repo: Path, scenario: Scenario) -> Syncer:
    doc = manifest(scenario)
    (repo / f"{scenario.name}.yaml").write_text(yaml.safe_dump(doc))
    run = Syncer(cluster, repo)
    run()
    cluster.rest.create(MXJOBS.format(namespace=NS), doc)
    cluster.run_job_controller(NS)
    roles = [("worker", i) for i in range(scenario.workers)]
    if scenario.servers:
        roles = [("scheduler", 0), *[("server", i) for i in range(scenario.servers)], *roles]
    for role, index in roles:
        pod = operator_pod(cluster, scenario.name, role, index)
        cluster.kubelet(pod["metadata"]["name"], namespace=NS, **RUN)
        cluster.kubelet(job=batch_job(cluster, scenario.name, role, index), namespace=NS, **RUN)
    wait_for(
        "for the operator to say the job runs",
        lambda: operator_state(cluster, scenario.name) == "Running",
    )
    assert summary_of(run(dry_run=True), scenario.name).state == "Running"
    return run


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_state_agrees_with_the_operators_after_each_outcome(
    cluster: RealCluster, repo: Path, scenario: Scenario
) -> None:
    run = start(cluster, repo, scenario)
    name = scenario.name
    for number, step in enumerate(scenario.steps, 1):
        pod = operator_pod(cluster, name, step.role, step.index)
        cluster.kubelet(pod["metadata"]["name"], namespace=NS, **step.how)
        ours = batch_job(cluster, name, step.role, step.index)
        if step.how == RUN:  # a retry: its new pod first
            cluster.run_job_controller(NS)
        cluster.kubelet(job=ours, namespace=NS, **step.how)
        where = f"step {number} ({step.role} {step.index}: {step.how})"
        try:
            wait_for(
                f"for the operator to say {step.operator}",
                lambda s=step: operator_state(cluster, name) == s.operator,
            )
        except TimeoutError:
            raise AssertionError(
                f"{where}: the operator says {operator_state(cluster, name)}, not {step.operator}"
            ) from None
        cluster.settle(NS)
        expected = step.mxgitops if step.kept else step.operator
        assert not step.kept or step.kept in KEPT, f"the manual has no row {step.kept}"
        state = states(run(dry_run=True), name)
        assert state[0] == expected, f"{where}: mxgitops says {state}, the operator {step.operator}"
    final = summary_of(run(), name)
    last = scenario.steps[-1]
    assert final.state == (last.mxgitops if last.kept else last.operator), final.reason
    if scenario.after_sync:
        assert final.action == scenario.after_sync and "finished-stops" in KEPT, final.reason


def test_the_ttl_ends_both_the_same_way(cluster: RealCluster, repo: Path) -> None:
    """`ttlSecondsAfterFinished: 1`, shorter than any sync interval. The operator deletes
    the MXJob a second after its completion; mxgitops, from the sync that saw it finish
    (the manual's `ttl-at-sync`): the job is read Succeeded, not Running, and never run
    again, and at the end nothing of it is left, as nothing of the MXJob is."""
    scenario = Scenario("ttl", "Never", (), servers=1, workers=1)
    doc = manifest(scenario)
    doc["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": 1}
    (repo / "ttl.yaml").write_text(yaml.safe_dump(doc))
    run = Syncer(cluster, repo)
    run()
    cluster.rest.create(MXJOBS.format(namespace=NS), doc)
    cluster.run_job_controller(NS)
    pod = operator_pod(cluster, "ttl", "scheduler", 0)
    cluster.kubelet(pod["metadata"]["name"], namespace=NS, **EXIT_0)
    cluster.kubelet(job=batch_job(cluster, "ttl", "scheduler", 0), namespace=NS, **EXIT_0)
    path = f"{MXJOBS.format(namespace=NS)}/ttl"
    wait_for("for the operator to delete the MXJob", lambda: cluster.rest.get_or_none(path) is None)
    assert "ttl-at-sync" in KEPT

    seen = summary_of(run(), "ttl")
    assert (seen.state, seen.action) == ("Succeeded", "stop"), seen.reason
    canary(cluster, "ttl-canary")  # the TTL has passed since that sync
    cleaned = summary_of(run(), "ttl")
    assert (cleaned.state, cleaned.action) == ("Succeeded", "clean"), cleaned.reason
    cluster.settle(NS)
    left = [o for kind in ("jobs", "services", "pods") for o in job_objects(cluster, "ttl", kind)]
    assert not left, [o["metadata"]["name"] for o in left]
    again = summary_of(run(), "ttl")
    assert (again.state, again.action) == ("Succeeded", "unchanged")
    assert not job_objects(cluster, "ttl")
