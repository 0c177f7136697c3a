"""Tenancy: writes into namespace N are made as N's tenant service account.

On the real control plane, where authorization is real: the teams overlay
(cronjob/overlays/teams, with components/policy and components/tenancy) is
installed, the sync runs with its ServiceAccount's own token (whose ClusterRole
may only read, impersonate and create Events), team-a has granted its tenant account what
cronjob/components/tenancy/tenant.yaml grants, team-b has not. team-a's job is
created; team-b's is refused with the API's 403, for that job only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.commands.sync import sync
from mxgitops.kube import cluster
from mxgitops.settings.config import SyncConfig
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.cronjob import install, kustomize, only
from tests.helpers.policy import RESTRICTED, TEAMS, TENANT, _collection, manifest


def test_only_requests_about_a_jobs_objects_act_as_the_tenant() -> None:
    tenant = cluster.Cluster(api_client=None, tenant_service_account="runner")
    acting = {
        "/apis/batch/v1/namespaces/team-a/jobs": "system:serviceaccount:team-a:runner",
        "/apis/batch/v1/namespaces/team-a/jobs/x-worker-abcde-0": (
            "system:serviceaccount:team-a:runner"
        ),
        "/api/v1/namespaces/team-b/services/x": "system:serviceaccount:team-b:runner",
        "/api/v1/namespaces/team-b/pods/x-0-abc/log": "system:serviceaccount:team-b:runner",
        "/apis/batch/v1/jobs": None,  # the cluster-wide LISTs: mxgitops' own
        "/api/v1/pods": None,
        "/api/v1/namespaces/mxgitops/configmaps": None,  # its ledger
        "/apis/coordination.k8s.io/v1/namespaces/mxgitops/leases/mxgitops-x": None,  # its Lease
    }
    for path, user in acting.items():
        assert tenant._acting_as(path).get("Impersonate-User") == user, path
    assert cluster.Cluster(api_client=None)._acting_as("/api/v1/namespaces/a/services") == {}


def test_the_teams_overlay_shrinks_mxgitops_rights() -> None:
    docs = kustomize(TEAMS)
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs == {"list", "watch", "impersonate", "get", "create", "patch"}
    (creates,) = [r for r in role["rules"] if "create" in r["verbs"]]
    assert creates == {
        "apiGroups": ["events.k8s.io"],
        "resources": ["events"],
        "verbs": ["get", "create", "patch"],
    }
    (impersonate,) = [r for r in role["rules"] if "impersonate" in r["verbs"]]
    assert impersonate["resourceNames"] == ["mxgitops-tenant"]
    config = only(
        [d for d in docs if d["metadata"]["name"].startswith("mxgitops-config")], "ConfigMap"
    )
    assert config["data"]["MXGITOPS_TENANT_SERVICE_ACCOUNT"] == "mxgitops-tenant"


def test_each_team_gets_what_its_namespace_allows(
    control_plane: Any,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    control_plane.wipe()
    docs = kustomize(TEAMS)
    kubeconfig = tmp_path / "serviceaccount.kubeconfig"
    made = install(control_plane, docs, kubeconfig)
    try:
        for team in ("team-a", "team-b"):
            control_plane.ensure_namespace(team)
            for doc in yaml.safe_load_all(TENANT.read_text()):
                if team == "team-a" or doc["kind"] == "ServiceAccount":
                    status, _, body = control_plane.raw("POST", _collection(doc, team), doc)
                    assert status in (201, 409), body
        (policy,) = [d for d in docs if d["metadata"]["name"].startswith("mxgitops-policy")]
        policy_file = tmp_path / "policy.yaml"
        policy_file.write_text(policy["data"]["policy.yaml"])
        image = "registry.example.com/teams/mxnet:1.9"
        remote = make_git_remote(
            "jobs",
            files={
                f"jobs/{team}.yaml": manifest(
                    "kubeflow", name, namespace=team, image=image, container=RESTRICTED
                )
                for team, name in (("team-a", "alpha"), ("team-b", "beta"))
            },
        )
        config = SyncConfig(
            repo=remote.url,
            path="jobs",
            namespace="team-a",
            state_namespace="mxgitops-teams",
            instance="teams",
            kubeconfig=kubeconfig,
            cache_dir=tmp_path / "cache",
            policy_file=policy_file,
            tenant_service_account="mxgitops-tenant",
        )
        outcome = sync(config)
        jobs = {j.qualified_name: j for j in outcome.summary.jobs}
        assert not outcome.summary.problems
        assert jobs["team-a/alpha"].errors == () and jobs["team-a/alpha"].action == "create"
        assert len(control_plane.objects("jobs", "team-a")) == 3
        assert control_plane.objects("jobs", "team-b") == []
        refused = jobs["team-b/beta"].errors
        assert refused[0].startswith("create service/beta-scheduler-")
        assert (
            'User "system:serviceaccount:team-b:mxgitops-tenant" cannot create resource '
            '"services"' in refused[0]
        ), refused
        # The sync's own account could not have written any of it: the tenant's did.
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": "system:serviceaccount:mxgitops-teams:mxgitops-teams",
                "groups": ["system:serviceaccounts"],
                "resourceAttributes": {
                    "namespace": "team-a",
                    "group": "batch",
                    "resource": "jobs",
                    "verb": "create",
                },
            },
        }
        status, _, answer = control_plane.raw(
            "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review
        )
        assert status == 201 and answer["status"]["allowed"] is False
    finally:
        for path in made:
            control_plane.raw("DELETE", path)
