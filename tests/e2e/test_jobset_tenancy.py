"""Tenancy with the JobSet runtime: a queued job's JobSet is written as the team's tenant.

On the real control plane with the real JobSet controller and Kueue (``ecosystem``): the
teams overlay (cronjob/overlays/teams: components/policy and components/tenancy, no
components/jobset) is installed, the sync runs with its ServiceAccount's own token, and
team-a has applied cronjob/components/tenancy/tenant.yaml. A job naming team-a's Kueue
queue is created, read back while Kueue admits it, replaced when its spec changes and
pruned when its manifest goes: no request of any of these syncs is refused (403), and
mxgitops' own account could not have written the JobSets: the tenant's did.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.commands.sync import SyncOutcome, sync
from mxgitops.settings.config import SyncConfig
from tests.controlplane.harness import wait_for
from tests.ecosystem.fixtures import KUEUE_GROUP, KUEUE_VERSION, Ecosystem
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.cronjob import install, kustomize
from tests.helpers.policy import RESTRICTED, TEAMS, TENANT, _collection

TEAM = "team-a"
QUEUE = "team-a"
SYNC_ACCOUNT = "system:serviceaccount:mxgitops-teams:mxgitops-teams"
TENANT_ACCOUNT = f"system:serviceaccount:{TEAM}:mxgitops-tenant"


def queued(name: str, workers: int = 1, suspend: bool = False) -> str:
    """A Kubeflow MXJob in team-a naming its queue and a priority class (Kueue's too)."""
    container = {
        "name": "mxnet",
        "image": "registry.example.com/teams/mxnet:1.9",
        **RESTRICTED,
    }
    replica = {"restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}
    return yaml.safe_dump(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MXJob",
            "metadata": {"name": name, "namespace": TEAM},
            "spec": {
                "jobMode": "MXTrain",
                "runPolicy": {
                    "schedulingPolicy": {"queue": QUEUE, "priorityClass": "low"},
                    **({"suspend": True} if suspend else {}),
                },
                "mxReplicaSpecs": {
                    "Scheduler": {"replicas": 1, **replica},
                    "Server": {"replicas": 1, **replica},
                    "Worker": {"replicas": workers, **replica},
                },
            },
        }
    )


def of_q(jobset: dict[str, Any]) -> bool:
    return bool(jobset["metadata"]["labels"].get("mxgitops.io/job") == "q")


def q_jobset(eco: Ecosystem) -> dict[str, Any]:
    (found,) = [j for j in eco.jobsets(TEAM) if of_q(j)]
    return found


def refused(outcome: SyncOutcome) -> list[str]:
    """Every error line of the sync and its jobs (a 403 would be one)."""
    return [*outcome.summary.problems, *(e for j in outcome.summary.jobs for e in j.errors)]


def test_a_queued_job_is_written_as_the_tenant_without_a_403(
    ecosystem: Ecosystem,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    real = ecosystem.real
    docs = kustomize(TEAMS)
    kubeconfig = tmp_path / "serviceaccount.kubeconfig"
    made = install(real, docs, kubeconfig)
    try:
        real.ensure_namespace(TEAM)
        for doc in yaml.safe_load_all(TENANT.read_text()):
            status, _, body = real.raw("POST", _collection(doc, TEAM), doc)
            assert status in (201, 409), body
        ecosystem.queue(QUEUE, TEAM, {"cpu": "64", "memory": "64Gi"})
        ecosystem.create(
            KUEUE_GROUP,
            "workloadpriorityclasses",
            {
                "apiVersion": KUEUE_VERSION,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": "low"},
                "value": 100,
            },
            None,
        )
        ecosystem.create(
            "/apis/scheduling.k8s.io/v1",
            "priorityclasses",
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "low"},
                "value": 100,
            },
            None,
        )
        (policy,) = [d for d in docs if d["metadata"]["name"].startswith("mxgitops-policy")]
        policy_file = tmp_path / "policy.yaml"
        policy_file.write_text(policy["data"]["policy.yaml"])
        # two jobs: removing one of them is a prune within the guards (half the jobs)
        remote = make_git_remote(
            "jobs", files={"jobs/q.yaml": queued("q"), "jobs/keep.yaml": queued("keep")}
        )

        def run() -> SyncOutcome:
            real.settle()
            config = SyncConfig(
                repo=remote.url,
                path="jobs",
                namespace=TEAM,
                state_namespace="mxgitops-teams",
                instance="teams",
                kubeconfig=kubeconfig,
                cache_dir=tmp_path / "cache",
                policy_file=policy_file,
                tenant_service_account="mxgitops-tenant",
                events=False,
            )
            outcome = sync(config)
            assert refused(outcome) == [], refused(outcome)
            return outcome

        def job(outcome: SyncOutcome) -> Any:
            (found,) = [j for j in outcome.summary.jobs if j.name == "q"]
            return found

        real.clear_log()
        assert job(run()).action == "create"
        jobset = q_jobset(ecosystem)
        assert jobset["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "low"
        wait_for("Kueue to admit q", lambda: q_jobset(ecosystem)["spec"]["suspend"] is False)
        # read back as mxgitops itself: the JobSets, pods and Kueue's Workloads
        assert job(run()).state in ("Pending", "Running")
        remote.commit({"jobs/q.yaml": queued("q", workers=2)}, "two workers")
        assert job(run()).action == "replace"
        old = jobset["metadata"]["name"]
        wait_for(
            "q's old JobSet to go",
            lambda: (
                [j["metadata"]["name"] != old for j in ecosystem.jobsets(TEAM) if of_q(j)] == [True]
            ),
        )
        # suspended once admitted: its Kueue Workload's spec.active, patched as the tenant
        wait_for("Kueue to admit q again", lambda: q_jobset(ecosystem)["spec"]["suspend"] is False)
        remote.commit({"jobs/q.yaml": queued("q", workers=2, suspend=True)}, "q waits")
        assert job(run()).action == "update"
        wait_for("Kueue to stop q", lambda: q_jobset(ecosystem)["spec"]["suspend"] is True)
        patched = [
            e["impersonated"]
            for e in real.request_log
            if e["resource"] == "workloads" and e["verb"] == "patch"
        ]
        assert patched and set(patched) == {TENANT_ACCOUNT}, patched
        remote.commit({"jobs/q.yaml": None}, "q is done")
        assert job(run()).action == "delete"
        wait_for("q's JobSet to go", lambda: not [j for j in ecosystem.jobsets(TEAM) if of_q(j)])

        writes = [
            (e["verb"], e["path"], e["impersonated"])
            for e in real.request_log
            if e["resource"] == "jobsets" and e["verb"] not in ("list", "watch")
        ]
        assert {verb for verb, _, _ in writes} >= {"create", "delete"}, writes
        assert {user for _, _, user in writes} == {TENANT_ACCOUNT}, writes
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": SYNC_ACCOUNT,
                "groups": ["system:serviceaccounts"],
                "resourceAttributes": {
                    "namespace": TEAM,
                    "group": "jobset.x-k8s.io",
                    "resource": "jobsets",
                    "verb": "create",
                },
            },
        }
        status, _, answer = real.raw(
            "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review
        )
        assert status == 201 and answer["status"]["allowed"] is False, answer
    finally:
        for path in made:
            real.raw("DELETE", path)
