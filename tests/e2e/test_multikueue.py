"""End to end: queued MXNet jobs synced against a Kueue MultiKueue manager and run on its
workers, each cluster a real control plane with the real JobSet v0.11.0 and Kueue
v0.17.0 (``tests/ecosystem/multikueue.py``).

mxgitops is given the manager's kubeconfig only: it creates the job's JobSet there,
Kueue dispatches it to a worker, and mxgitops reads which one and the job's state from
the manager's JobSet (its status mirrored from the worker's) and Workload
(``status.clusterName``). The workers' pods are moved by their fake kubelets. The
clusters are started once for this module (``multikueue_clusters``, its own worker
group); every test starts with the JobSets of the last one gone from every cluster.
"""

from __future__ import annotations

import base64
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.outputs.events import REPORTING_CONTROLLER
from mxgitops.outputs.forge.wanted import wanted
from mxgitops.outputs.summary import Summary
from tests.controlplane.build import ensure_built
from tests.controlplane.harness import wait_for
from tests.ecosystem.multikueue import (
    ADMISSION_CHECK,
    CLUSTER_QUEUE,
    LOCAL_QUEUE,
    Member,
    MultiKueue,
)
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.sync import NS, Syncer, mxjob, summary_of, sync_hooked, write

EVENTS = "/apis/events.k8s.io/v1"
# The module's first test also starts the three clusters (2 min on a busy 2-core machine).
pytestmark = pytest.mark.timeout(360)


@pytest.fixture
def run(multikueue: MultiKueue, tmp_path: Path) -> Syncer:
    """Syncs against the manager only: its kubeconfig is all mxgitops is given."""
    return Syncer(multikueue.manager.eco, tmp_path / "repo")  # type: ignore[arg-type]


def queued(
    name: str, *, cpu: str = "1", restart: str = "OnFailure", suspend: bool = False, **spec: Any
) -> dict[str, Any]:
    """A dist job (1 scheduler, 1 server, 2 workers) in the LocalQueue every cluster has,
    each worker asking for ``cpu``."""
    policy: dict[str, Any] = {"schedulingPolicy": {"queue": LOCAL_QUEUE}}
    if suspend:
        policy["suspend"] = True
    doc = mxjob(name, restart=restart, runPolicy=policy, **spec)
    worker = doc["spec"]["mxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"] = {"requests": {"cpu": cpu}}
    return doc


def the_jobset(member: Member, job: str) -> dict[str, Any] | None:
    found = [
        j for j in member.eco.jobsets(NS) if j["metadata"]["labels"].get("mxgitops.io/job") == job
    ]
    return found[0] if found else None


def workload_of(member: Member, jobset: dict[str, Any]) -> dict[str, Any] | None:
    uid = jobset["metadata"]["uid"]
    for workload in member.eco.workloads(NS):
        if any(r.get("uid") == uid for r in workload["metadata"].get("ownerReferences") or []):
            return workload
    return None


def dispatched(
    mk: MultiKueue, job: str, timeout: float = 60, not_to: Member | None = None
) -> Member:
    """The worker Kueue runs ``job`` on (not ``not_to``), once its Workload on the
    manager names it and the worker has the JobSet's copy."""

    def where() -> Member | None:
        jobset = the_jobset(mk.manager, job)
        workload = workload_of(mk.manager, jobset) if jobset else None
        cluster = ((workload or {}).get("status") or {}).get("clusterName")
        if not cluster or (not_to is not None and cluster == not_to.name):
            return None
        worker = mk.members[cluster]
        return worker if the_jobset(worker, job) else None

    return wait_for(f"Kueue to dispatch {job} to a worker", where, timeout)


def pod(worker: Member, jobset: str, role: str, index: int = 0) -> str:
    def find() -> str | None:
        for found in worker.eco.pods(jobset, NS):
            labels = found["metadata"]["labels"]
            if (
                labels.get("jobset.sigs.k8s.io/replicatedjob-name") == role
                and labels.get("batch.kubernetes.io/job-completion-index") == str(index)
                and found["status"].get("phase") not in ("Succeeded", "Failed")
            ):
                return str(found["metadata"]["name"])
        return None

    return wait_for(f"the {role} {index} pod of {jobset} on {worker.name}", find)


def run_every_pod(worker: Member, jobset: str) -> None:
    """The fake kubelet runs the scheduler, then (once JobSet starts them) the others."""
    for role, index in (("scheduler", 0), ("server", 0), ("worker", 0), ("worker", 1)):
        worker.real.kubelet(pod(worker, jobset, role, index), namespace=NS, phase="Running")


def mirrored(mk: MultiKueue, job: str, what: str, probe: Any, timeout: float = 60) -> None:
    """Until the manager's JobSet (its status mirrored from the worker) satisfies probe."""
    wait_for(
        f"the manager's JobSet of {job} {what}",
        lambda: probe((the_jobset(mk.manager, job) or {}).get("status") or {}) or None,
        timeout,
    )


def ready(status: dict[str, Any]) -> bool:
    """Every role's child Job ready, as mirrored from the worker."""
    roles = status.get("replicatedJobsStatus") or []
    return bool(roles) and all(r.get("ready") for r in roles)


def condition(status: dict[str, Any], kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in status.get("conditions") or [])


def our_events(member: Member) -> list[dict[str, Any]]:
    items = member.real.rest.get(f"{EVENTS}/namespaces/{NS}/events")["items"]
    return [e for e in items if e.get("reportingController") == REPORTING_CONTROLLER]


def no_writes_to(workers: list[Member]) -> None:
    """mxgitops' identity made no request of any worker (it has no credentials there)."""
    for worker in workers:
        assert worker.real.request_log == [], worker.name


# -- the harness ------------------------------------------------------------------------------


def test_the_clusters_are_set_up_as_kueues_multikueue_task_describes(
    multikueue: MultiKueue, tmp_path: Path
) -> None:
    kubeconfig = multikueue.kubeconfig(tmp_path / "kubeconfig")
    config = yaml.safe_load(kubeconfig.read_text())
    assert [c["name"] for c in config["contexts"]] == ["manager", "worker-a", "worker-b"]
    assert config["current-context"] == "manager"
    kubectl = str(ensure_built() / "kubectl")

    def get(context: str, *what: str) -> str:
        return subprocess.run(
            [kubectl, f"--kubeconfig={kubeconfig}", f"--context={context}", "get", *what],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout

    # MultiKueue's objects on the manager, each Active: both workers connected
    for kind, name in (
        ("multikueuecluster", "worker-a"),
        ("multikueuecluster", "worker-b"),
        ("admissioncheck", ADMISSION_CHECK),
        ("clusterqueue", CLUSTER_QUEUE),
    ):
        shown = get("manager", kind, name, "-o", "jsonpath={.status.conditions[0].status}")
        assert shown == "True", (kind, name)
    # the namespaces and LocalQueues mirrored on each worker, no MultiKueue there
    for worker in ("worker-a", "worker-b"):
        queues = get(worker, "localqueue", "-n", NS, "-o", "name")
        assert queues == f"localqueue.kueue.x-k8s.io/{LOCAL_QUEUE}\n"
        assert get(worker, "admissionchecks", "-o", "name") == ""
    # The manager reaches each worker with certificates inline, as MultiKueue requires.
    secret = multikueue.manager.real.rest.get(
        "/api/v1/namespaces/kueue-system/secrets/worker-a-kubeconfig"
    )
    kubeconfig_there = base64.b64decode(secret["data"]["kubeconfig"]).decode()
    assert "certificate-authority-data" in kubeconfig_there
    assert multikueue.started_in > 0


# -- a job through the manager ---------------------------------------------------------------


def test_a_queued_job_synced_against_the_manager_runs_on_a_worker_and_says_which(
    multikueue: MultiKueue, run: Syncer
) -> None:
    write(run.repo, queued("a"))
    synced = time.monotonic()
    outcome = run(events=True)
    assert outcome.ok and summary_of(outcome, "a").action == "create"
    here = the_jobset(multikueue.manager, "a")
    assert here is not None
    assert here["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == LOCAL_QUEUE
    # Kueue's webhook hands the manager's JobSet to MultiKueue: no pod of it runs here.
    assert here["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    worker = dispatched(multikueue, "a")
    latency = time.monotonic() - synced
    name = here["metadata"]["name"]
    run_every_pod(worker, name)
    assert multikueue.manager.eco.pods(name, NS) == []
    mirrored(multikueue, "a", "running", ready)
    job = summary_of(run(events=True), "a")
    assert (job.state, job.placement) == ("Running", worker.name), (job.state, job.placement)
    assert f"ml/a: running on cluster {worker.name}" in job.details()
    worker.real.kubelet(pod(worker, name, "scheduler"), namespace=NS, phase="Succeeded")
    mirrored(multikueue, "a", "Completed", lambda s: condition(s, "Completed"))
    outcome = run(events=True)
    job = summary_of(outcome, "a")
    assert (job.state, job.placement) == ("Succeeded", worker.name)
    finish = [e for e in our_events(multikueue.manager) if e["reason"] == "Succeeded"]
    assert [e["note"].split(" (")[0] for e in finish] == [f"succeeded on cluster {worker.name}"]
    assert summary_of(run(), "a").action == "unchanged"  # finished: never run again
    no_writes_to(multikueue.workers)
    print(f"dispatch: {latency:.1f} s from the sync's start to the JobSet on {worker.name}")


def test_a_failed_replica_on_a_worker_fails_the_job_saying_where_and_why_no_log(
    multikueue: MultiKueue, run: Syncer
) -> None:
    write(run.repo, queued("a", restart="Never"))
    assert run().ok
    worker = dispatched(multikueue, "a")
    name = the_jobset(multikueue.manager, "a")["metadata"]["name"]  # type: ignore[index]
    worker.real.kubelet(pod(worker, name, "scheduler"), namespace=NS, phase="Running")
    failing = pod(worker, name, "worker", 1)
    worker.real.kubelet(failing, namespace=NS, phase="Failed", exit_code=3, message="loss is NaN")
    mirrored(multikueue, "a", "Failed", lambda s: condition(s, "Failed"))
    job = summary_of(run(events=True), "a")
    assert (job.state, job.placement) == ("Failed", worker.name)
    assert job.failure is not None and job.failure["replica"] == "WORKER"
    assert job.failure["log"].startswith(f"log unavailable: its pods ran on cluster {worker.name}")
    (event,) = [e for e in our_events(multikueue.manager) if e["reason"] == "Failed"]
    assert event["note"].startswith(f"failed on cluster {worker.name}: WORKER failed")


def test_drift_replace_and_prune_through_the_manager_reach_the_worker(
    multikueue: MultiKueue, run: Syncer
) -> None:
    """The manager's JobSet edited by hand, then deleted by hand: each next sync repairs
    it there (the worker's copy is Kueue's to follow), then a replace and a prune; no
    write to a worker."""
    write(run.repo, queued("a"), queued("b"))  # b: the tree is never emptied (a guard)
    assert run().ok
    first = dispatched(multikueue, "a")
    old = the_jobset(first, "a")["metadata"]["name"]  # type: ignore[index]
    path = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NS}/jobsets/{old}"
    multikueue.manager.real.rest.patch(path, {"spec": {"ttlSecondsAfterFinished": 3600}})
    job = summary_of(run(), "a")
    assert (job.action, job.placement) == ("repair", first.name), job
    assert "edited by hand, set back in place: spec.ttlSecondsAfterFinished" in job.reason
    edited = the_jobset(multikueue.manager, "a")
    assert edited is not None and "ttlSecondsAfterFinished" not in edited["spec"]
    copy = the_jobset(first, "a")["metadata"]["uid"]  # type: ignore[index]
    multikueue.manager.real.rest.delete(path)
    wait_for(
        "the hand-deleted JobSet gone from the manager and its copy from the worker",
        lambda: (
            the_jobset(multikueue.manager, "a") is None
            and all(j["metadata"]["uid"] != copy for j in first.eco.jobsets(NS))
        ),
    )
    # nothing of it left anywhere, and not finished (the ledger): created again, there
    again = run()
    assert (summary_of(again, "a").action, summary_of(again, "b").action) == ("create", "unchanged")
    dispatched(multikueue, "a")
    write(run.repo, queued("a", workers=3))
    assert summary_of(run(), "a").action == "replace"

    def replaced() -> Member | None:
        new = the_jobset(multikueue.manager, "a")
        if new is None or new["metadata"]["name"] == old:
            return None
        if any(j["metadata"]["name"] == old for w in multikueue.workers for j in w.eco.jobsets(NS)):
            return None
        return dispatched(multikueue, "a")

    wait_for("the new JobSet dispatched and the old one gone everywhere", replaced)
    (run.repo / "a.yaml").unlink()
    assert summary_of(run(), "a").action == "delete"
    wait_for(
        "the JobSet gone from every cluster",
        lambda: all(the_jobset(m, "a") is None for m in multikueue.members.values()),
    )
    no_writes_to(multikueue.workers)


def test_suspend_and_resume_through_the_manager_stop_and_restart_it_on_a_worker(
    multikueue: MultiKueue, run: Syncer
) -> None:
    """runPolicy.suspend deactivates the manager's Workload (Kueue's way to stop a job):
    Kueue takes the JobSet off its worker; resuming dispatches it again."""
    write(run.repo, queued("a"))
    assert run().ok
    dispatched(multikueue, "a")
    write(run.repo, queued("a", suspend=True))
    assert summary_of(run(), "a").action == "update"
    wait_for(
        "the JobSet gone from every worker",
        lambda: all(the_jobset(w, "a") is None for w in multikueue.workers),
    )
    job = summary_of(run(), "a")
    assert (job.state, job.placement) == ("Suspended", ""), (job.state, job.placement)
    write(run.repo, queued("a"))
    assert summary_of(run(), "a").action == "update"
    worker = dispatched(multikueue, "a")
    assert summary_of(run(), "a").placement == worker.name
    no_writes_to(multikueue.workers)


# -- failure cases ------------------------------------------------------------------------------


def workload_says(mk: MultiKueue, job: str, probe: Any) -> dict[str, Any]:
    """The manager's Workload of ``job`` once ``probe`` holds of its status."""

    def found() -> dict[str, Any] | None:
        jobset = the_jobset(mk.manager, job)
        workload = workload_of(mk.manager, jobset) if jobset else None
        return workload if workload and probe(workload.get("status") or {}) else None

    return wait_for(f"the manager's Workload of {job}", found)


def check_state(status: dict[str, Any]) -> str:
    return next((c.get("state", "") for c in status.get("admissionChecks") or []), "")


def test_a_job_too_big_for_every_worker_waits_queued_saying_so(
    multikueue: MultiKueue, run: Syncer
) -> None:
    """12 CPUs fit the manager's quota (the workers' 8 each, summed) and no worker's."""
    write(run.repo, queued("big", cpu="6"))
    assert run().ok
    workload_says(
        multikueue,
        "big",
        lambda s: condition(s, "QuotaReserved") and s.get("nominatedClusterNames"),
    )
    job = summary_of(run(), "big")
    assert job.state == "Queued", job.state
    assert job.state_reason.startswith(
        "quota reserved; waiting for admission check multikueue: Pending"
    ), job.state_reason
    assert "admitted by none yet" in job.state_reason
    assert all(the_jobset(w, "big") is None for w in multikueue.workers)
    # more than the manager's own quota: Kueue's word on the manager
    write(run.repo, queued("big", cpu="6"), queued("huge", cpu="10"))
    assert run().ok
    workload_says(
        multikueue,
        "huge",
        lambda s: any(c["type"] == "QuotaReserved" for c in s.get("conditions") or []),
    )
    job = summary_of(run(), "huge")
    assert job.state == "Queued" and "insufficient quota for cpu" in job.state_reason, (
        job.state_reason
    )


def test_workers_without_the_local_queue_are_passed_over_and_named(
    multikueue: MultiKueue, run: Syncer
) -> None:
    """With no worker mirroring the LocalQueue the job waits, naming the clusters it was
    sent to (their reason, on their own Workloads, is not carried to the manager); once
    one has it, the job runs there and only there."""
    for worker in multikueue.workers:
        multikueue.remove_local_queue(worker, NS)
    lacking, other = multikueue.workers
    try:
        write(run.repo, queued("a"))
        assert run().ok
        workload_says(multikueue, "a", lambda s: len(s.get("nominatedClusterNames") or []) == 2)
        for worker in multikueue.workers:  # what each worker says, there only
            wait_for(
                f"{worker.name}'s Workload to say why",
                lambda w=worker: any(
                    c.get("message") == f"LocalQueue {LOCAL_QUEUE} doesn't exist"
                    for wl in w.eco.workloads(NS)
                    for c in wl.get("status", {}).get("conditions") or []
                ),
            )
        job = summary_of(run(), "a")
        assert job.state == "Queued", job.state
        assert "sent to cluster worker-a, worker-b, admitted by none yet" in job.state_reason
        multikueue.add_namespace(other, NS)
        assert dispatched(multikueue, "a") is other
        assert the_jobset(lacking, "a") is None
        assert summary_of(run(), "a").placement == other.name
    finally:
        for worker in multikueue.workers:
            multikueue.add_namespace(worker, NS)


def test_two_syncs_at_once_against_the_manager_create_the_job_once(
    multikueue: MultiKueue, run: Syncer
) -> None:
    """Another sync creates the job between this one's read and its Lease: this one
    reads again under the Lease and leaves it, so Kueue dispatches one JobSet."""
    write(run.repo, queued("a"))

    def another_sync() -> None:
        assert summary_of(run(), "a").action == "create"

    outcome = sync_hooked(run, another_sync)
    assert outcome.ok and summary_of(outcome, "a").action == "unchanged"
    assert len(multikueue.manager.eco.jobsets(NS)) == 1
    worker = dispatched(multikueue, "a")
    others = [w for w in multikueue.workers if w is not worker]
    assert all(the_jobset(w, "a") is None for w in others)


def test_a_lost_worker_is_waited_for_then_its_job_runs_again_on_another(
    multikueue: MultiKueue, run: Syncer, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    """The worker's kube-apiserver killed while the job runs there: Kueue keeps it for
    its workerLostTimeout (30 s here), then dispatches it again; the note and `mxgitops
    status` say it runs again, on which cluster."""
    remote = make_git_remote("jobs", files={"a.yaml": yaml.safe_dump(queued("a"))})
    assert run(repo=remote.url).ok
    lost = dispatched(multikueue, "a")
    name = the_jobset(multikueue.manager, "a")["metadata"]["name"]  # type: ignore[index]
    run_every_pod(lost, name)
    mirrored(multikueue, "a", "running", ready)
    assert summary_of(run(repo=remote.url), "a").placement == lost.name
    lost.plane.kill("kube-apiserver")
    killed = time.monotonic()
    try:
        wait_for(
            f"the manager to see {lost.name} lost",
            lambda: not _cluster_active(multikueue, lost.name),
            timeout=60,
        )
        # until Kueue's timeout, the last state mirrored, on the lost cluster, said lost
        job = summary_of(run(repo=remote.url), "a")
        assert (job.state, job.placement) == ("Running", lost.name)
        said = f"ml/a: running on cluster {lost.name}: cluster {lost.name} is unreachable since "
        assert said in (remote.note(remote.rev()) or ""), remote.note(remote.rev())
        assert "Kueue dispatches the job again after its workerLostTimeout" in job.unreachable
        (status,) = wanted(Summary(commit="c" * 40, jobs=(job,)), limit=1)
        assert status.description == f"1 running on {lost.name} (unreachable)"
        survivor = dispatched(multikueue, "a", timeout=120, not_to=lost)
        moved = time.monotonic() - killed
        run_every_pod(survivor, name)
        mirrored(multikueue, "a", "running again", ready)
        job = summary_of(run(repo=remote.url), "a")
        assert (job.state, job.placement, job.unreachable) == ("Running", survivor.name, "")
        again = (
            f"ml/a: dispatched again by Kueue, from cluster {lost.name} to {survivor.name}: "
            "it runs again from the start"
        )
        assert again in (remote.note(remote.rev()) or ""), remote.note(remote.rev())
        shown = CliRunner().invoke(
            main, ["status", "--repo", remote.url, "--cache-dir", str(tmp_path / "status")]
        )
        assert again in shown.output and f"ml/a: running on cluster {survivor.name}" in shown.output
        print(f"lost worker: dispatched again to {survivor.name} {moved:.1f} s after the kill")
    finally:
        lost.plane.restart("kube-apiserver")
        multikueue.wait_active()


def _cluster_active(mk: MultiKueue, name: str) -> bool:
    found = mk.manager.real.rest.get(f"/apis/kueue.x-k8s.io/v1beta2/multikueueclusters/{name}")
    return condition(found.get("status") or {}, "Active")
