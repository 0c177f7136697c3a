"""cronjob/: the base and the example overlay build with the real kubectl, every object
passes strict schema validation for the oldest and newest Kubernetes the manual supports,
the CronJob's pod passes the Pod Security `restricted` level, the RBAC is exactly what a
sync uses, and two instances install side by side. (tests/test_cronjob_e2e.py runs the
CronJob's command against the API double.)"""

from __future__ import annotations

import copy
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from mxgitops.cli import sync
from mxgitops.kube import lease
from tests.helpers.cronjob import (
    BASE,
    CRONJOB,
    OVERLAY,
    ROOT,
    Docs,
    granted,
    kustomize,
    only,
    pod_template,
    supported_versions,
    violations,
)

TENANT = CRONJOB / "components/tenancy/tenant.yaml"
# What a sync does, per (API group, resource): cluster.py, lease.py and ledgerstore.py.
CLUSTER_WIDE = {
    ("batch", "jobs"): {"list", "get", "create", "patch", "delete"},
    ("", "services"): {"list", "get", "create", "patch", "delete"},
    ("", "pods"): {"list"},
    ("", "pods/log"): {"get"},  # failurelog.py: a newly failed container's last lines
    # events.py: what a sync did, on each job; a lasting hold read back, then a series
    ("events.k8s.io", "events"): {"get", "create", "patch"},
    ("", "events"): {"list"},  # kube/reads.py: how a gone pod was disrupted
    # Listed where the ledger does not say this instance has none (404 without JobSet).
    ("jobset.x-k8s.io", "jobsets"): {"list"},
}
IN_OWN_NAMESPACE = {
    ("coordination.k8s.io", "leases"): {"get", "create", "update"},
    ("", "configmaps"): {"get", "list", "create", "update"},
}
CLUSTER_SCOPED = frozenset({"Namespace", "ClusterRole", "ClusterRoleBinding"})


@pytest.fixture(scope="module")
def base() -> Docs:
    return kustomize(BASE)


@pytest.fixture(scope="module")
def overlay() -> Docs:
    return kustomize(OVERLAY)


def test_the_base_and_the_overlay_build(base: Docs, overlay: Docs) -> None:
    kinds = ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
    kinds += ["ConfigMap", "CronJob"]
    assert sorted(d["kind"] for d in base) == sorted(kinds)
    assert sorted(d["kind"] for d in overlay) == sorted(
        [*kinds, "Namespace", "PersistentVolumeClaim"]
    )
    namespace = only(overlay, "Namespace")["metadata"]
    assert namespace["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for doc in overlay:
        if doc["kind"] not in CLUSTER_SCOPED:
            assert doc["metadata"]["namespace"] == namespace["name"], doc["metadata"]


@pytest.mark.parametrize("which", ["base", "overlay"])
@pytest.mark.parametrize("end", ["oldest", "newest"])
def test_every_object_passes_strict_schema_validation(
    which: str, end: str, request: pytest.FixtureRequest
) -> None:
    version = supported_versions()[0 if end == "oldest" else 1] + ".0"
    for doc in request.getfixturevalue(which):
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("which", ["base", "overlay"])
def test_the_pod_passes_pod_security_restricted(which: str, request: pytest.FixtureRequest) -> None:
    assert violations(pod_template(request.getfixturevalue(which))) == []


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(template: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = template
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        node[int(last) if last.isdigit() else last] = value

    return change


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        (_set("spec.containers.0.securityContext.allowPrivilegeEscalation", True), "allowPriv"),
        (_set("spec.containers.0.securityContext.capabilities", {"drop": ["NET_RAW"]}), "drop ALL"),
        (_set("spec.containers.0.securityContext.capabilities.add", ["SYS_ADMIN"]), "capabilit"),
        (_set("spec.containers.0.securityContext.runAsNonRoot", False), "runAsNonRoot"),
        (_set("spec.securityContext.runAsUser", 0), "runAsUser"),
        (_set("spec.securityContext.seccompProfile", {"type": "Unconfined"}), "seccomp"),
        (_set("spec.volumes.0", {"name": "h", "hostPath": {"path": "/"}}), "hostPath"),
        (_set("spec.hostNetwork", True), "hostNetwork"),
        (_set("spec.containers.0.securityContext.privileged", True), "privileged"),
    ],
)
def test_the_check_catches_what_restricted_refuses(
    base: Docs, change: Callable[[dict[str, Any]], None], rule: str
) -> None:
    template = copy.deepcopy(pod_template(base))
    change(template)
    assert any(rule in v for v in violations(template)), violations(template)


def test_the_cronjob_is_hardened(base: Docs, overlay: Docs) -> None:
    spec = only(base, "CronJob")["spec"]
    assert spec["concurrencyPolicy"] == "Forbid"
    assert 0 < spec["startingDeadlineSeconds"] < 300  # under the five-minute schedule
    assert spec["successfulJobsHistoryLimit"] >= 1 and spec["failedJobsHistoryLimit"] >= 1
    job = spec["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0
    assert job["activeDeadlineSeconds"] > lease.DEFAULT_DURATION_SECONDS
    pod = job["template"]["spec"]
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["resources"]["limits"]["memory"] and container["resources"]["requests"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # Everything written goes to a volume: HOME, TMPDIR and the Git cache.
    for variable in ("HOME", "TMPDIR", "MXGITOPS_CACHE_DIR"):
        assert "emptyDir" in volumes[mounts[env[variable]]], variable
    overlay_pod = pod_template(overlay)["spec"]
    cache = next(v for v in overlay_pod["volumes"] if v["name"] == mounts["/cache"])
    claim = only(overlay, "PersistentVolumeClaim")["metadata"]["name"]
    assert cache == {"name": "cache", "persistentVolumeClaim": {"claimName": claim}}


def test_every_setting_of_the_config_is_an_option_of_sync(base: Docs, overlay: Docs) -> None:
    envvars = {p.envvar for p in sync.params if getattr(p, "envvar", None)}
    for docs in (base, overlay):
        data = only(docs, "ConfigMap")["data"]
        assert set(data) <= envvars, set(data) - envvars
        # Where the Lease and ledger live is the pod's namespace: no variable may move it.
        assert "MXGITOPS_STATE_NAMESPACE" not in data and "MXGITOPS_NAMESPACE" not in data


@pytest.mark.parametrize("which", ["base", "overlay"])
def test_rbac_grants_exactly_what_a_sync_uses(which: str, request: pytest.FixtureRequest) -> None:
    docs = request.getfixturevalue(which)
    assert granted(docs, "ClusterRole") == CLUSTER_WIDE
    assert granted(docs, "Role") == IN_OWN_NAMESPACE
    account = only(docs, "ServiceAccount")["metadata"]
    for binding in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        (subject,) = binding["subjects"]
        assert (subject["name"], subject["namespace"]) == (
            account["name"],
            account.get("namespace", "mxgitops"),
        )
    pod = pod_template(docs)["spec"]
    assert pod["serviceAccountName"] == account["name"]


def test_two_instances_install_side_by_side(overlay: Docs, tmp_path: Path) -> None:
    """A copy of the overlay for another instance shares no cluster-scoped name with it,
    and every cluster-scoped name carries its instance."""
    second = tmp_path / "overlays/team-b"
    shutil.copytree(OVERLAY, second)
    shutil.copytree(BASE, tmp_path / "base")
    for name in ("kustomization.yaml", "config.env", "namespace.yaml"):
        text = (second / name).read_text().replace("example", "team-b")
        (second / name).write_text(text)
    other = kustomize(second)
    for docs, instance in ((overlay, "example"), (other, "team-b")):
        assert only(docs, "ConfigMap")["data"]["MXGITOPS_INSTANCE"] == instance
        for doc in docs:
            if doc["kind"] in CLUSTER_SCOPED:
                assert doc["metadata"]["name"].endswith(f"-{instance}"), doc["metadata"]
    names = [(d["kind"], d["metadata"]["name"]) for d in overlay + other]
    assert len(names) == len(set(names))


def test_the_monitoring_component_reads_only_what_a_sync_pushes(tmp_path: Path) -> None:
    """The overlay with the monitoring component: the Pushgateway setting is an option of
    sync, and every metric its alerts and dashboard read is one metrics.py pushes."""
    import json

    from mxgitops.outputs import metrics
    from mxgitops.outputs.summary import JobSummary, Summary
    from tests.helpers.records import finished_record, job, summary_with

    shutil.copytree(CRONJOB, tmp_path / "cronjob")
    overlay = tmp_path / "cronjob/overlays/example/kustomization.yaml"
    overlay.write_text(overlay.read_text() + "components:\n  - ../../components/monitoring\n")
    docs = kustomize(overlay.parent)
    config = next(d for d in docs if d["metadata"]["name"].startswith("mxgitops-config"))
    envvars = {p.envvar for p in sync.params if getattr(p, "envvar", None)}
    assert "MXGITOPS_PUSHGATEWAY" in config["data"] and set(config["data"]) <= envvars
    rule = only(docs, "PrometheusRule")
    alerts = {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert set(alerts) == {
        "MxgitopsNoSuccessfulSync",
        "MxgitopsSyncsFailing",
        "MxgitopsJobFailed",
        "MxgitopsMetricsStale",
    }
    dashboard = next(d for d in docs if d["metadata"]["name"].startswith("mxgitops-dashboard"))
    panels = json.loads(dashboard["data"]["mxgitops.json"])["panels"]
    queries = [t["expr"] for p in panels for t in p["targets"]]
    pushed = metrics.registry_for(
        metrics.SyncMetrics(
            "i",
            1.0,
            2.0,
            0,
            Summary(commit="c", jobs=(JobSummary("n", "j", "create", "r", objects=("+job/j",)),)),
        )
    )
    names = {s.name for family in pushed.collect() for s in family.samples}
    training = metrics.training_registry(summary_with(job("j", "Succeeded", finished_record())))
    names |= {s.name for family in training.collect() for s in family.samples}
    read = {n for text in [*alerts.values(), *queries] for n in re.findall(r"\bmxgitops_\w+", text)}
    assert read and read <= names, read - names
    assert "push_time_seconds" in alerts["MxgitopsMetricsStale"]


def test_the_jobset_component_grants_what_the_jobset_runtime_writes(tmp_path: Path) -> None:
    """components/jobset over the example overlay; under tenancy (components/tenancy,
    listed after it or alone) mxgitops' own ClusterRole reads what the runtime reads and
    writes nothing: the JobSet runtime's writes are the tenant's (tenant.yaml)."""
    runtime = {
        ("jobset.x-k8s.io", "jobsets"): {"list", "get", "create", "patch", "delete"},
        ("kueue.x-k8s.io", "workloads"): {"list", "patch"},
        ("kueue.x-k8s.io", "workloadpriorityclasses"): {"list"},
        ("kueue.x-k8s.io", "multikueueclusters"): {"list"},
    }
    tenancy_reads = {
        ("batch", "jobs"): {"list", "watch"},
        ("", "services"): {"list", "watch"},
        ("", "pods"): {"list", "watch"},
        ("jobset.x-k8s.io", "jobsets"): {"list", "watch"},
        ("kueue.x-k8s.io", "workloads"): {"list", "watch"},
        ("kueue.x-k8s.io", "workloadpriorityclasses"): {"list", "watch"},
        ("kueue.x-k8s.io", "multikueueclusters"): {"list", "watch"},
        ("", "serviceaccounts"): {"impersonate"},
        ("events.k8s.io", "events"): {"get", "create", "patch"},
    }
    for name, components in (
        ("plain", ["jobset"]),
        ("tenancy", ["tenancy"]),
        ("jobset-then-tenancy", ["jobset", "tenancy"]),
    ):
        overlay = tmp_path / name
        overlay.mkdir()
        (overlay / "kustomization.yaml").write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kustomize.config.k8s.io/v1beta1",
                    "kind": "Kustomization",
                    # kustomize takes relative paths only
                    "resources": [os.path.relpath(OVERLAY, overlay)],
                    "components": [
                        os.path.relpath(ROOT / "cronjob/components" / c, overlay)
                        for c in components
                    ],
                }
            )
        )
        granted_here = granted(kustomize(overlay), "ClusterRole")
        if name == "plain":
            assert granted_here == {**CLUSTER_WIDE, **runtime}
        else:
            assert granted_here == tenancy_reads, name


def test_the_tenant_role_grants_what_the_jobset_runtime_writes() -> None:
    """tenant.yaml: what a sync writes as the tenant for a job on either runtime."""
    docs = [d for d in yaml.safe_load_all(TENANT.read_text()) if d]
    assert granted(docs, "Role") == {
        ("batch", "jobs"): {"get", "create", "patch", "delete"},
        ("", "services"): {"get", "create", "delete"},
        ("", "pods/log"): {"get"},
        ("jobset.x-k8s.io", "jobsets"): {"get", "create", "patch", "delete"},
        ("kueue.x-k8s.io", "workloads"): {"patch"},
    }
