"""cronjob/components/dashboard over the example overlay, built with the real kubectl: its
objects pass strict schema validation, its pod Pod Security `restricted`, it runs the
CronJob's image with another command, has no Kubernetes rights (no Role, no token
mounted), a read-only root filesystem but for emptyDirs, and memory limits."""

from __future__ import annotations

import shutil

import kubernetes_validate
import pytest
import yaml

from mxgitops.cli import dashboard
from tests.helpers.cronjob import CRONJOB, Docs, kustomize, only, supported_versions, violations


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Docs:
    """The example overlay, as a user copies it, with the dashboard's component."""
    copy = tmp_path_factory.mktemp("dashboard") / "cronjob"
    shutil.copytree(CRONJOB, copy)
    overlay = copy / "overlays/example/kustomization.yaml"
    overlay.write_text(overlay.read_text() + "components:\n  - ../../components/dashboard\n")
    return kustomize(overlay.parent)


def dashboard_docs(docs: Docs) -> Docs:
    return [d for d in docs if d["metadata"]["name"].startswith("mxgitops-dashboard")]


def test_the_component_adds_a_deployment_and_a_service_and_no_rights(docs: Docs) -> None:
    assert sorted(d["kind"] for d in dashboard_docs(docs)) == ["Deployment", "Service"]
    for doc in dashboard_docs(docs):
        assert doc["metadata"]["namespace"] == "mxgitops-example"
    pod = only(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in pod  # the namespace's default, granted nothing here


@pytest.mark.parametrize("end", ["oldest", "newest"])
def test_every_object_passes_strict_schema_validation(docs: Docs, end: str) -> None:
    version = supported_versions()[0 if end == "oldest" else 1] + ".0"
    for doc in dashboard_docs(docs):
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_pod_passes_pod_security_restricted(docs: Docs) -> None:
    assert violations(only(docs, "Deployment")["spec"]["template"]) == []


def test_read_only_but_for_emptydirs_with_limits_and_the_cronjobs_image(docs: Docs) -> None:
    pod = only(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        assert "emptyDir" in volume or mount.get("readOnly") is True, mount
    assert "emptyDir" in volumes["cache"]
    assert container["resources"]["limits"]["memory"] == "512Mi"
    cronjob = only(docs, "CronJob")
    (sync,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == sync["image"]
    assert container["command"] == ["mxgitops"] and container["args"][0] == "dashboard"
    options = {f"--{p.name.replace('_', '-')}" for p in dashboard.params}
    assert {a.split("=")[0] for a in container["args"][1:]} <= options
    config = container["envFrom"][0]["configMapRef"]["name"]
    assert config == only(docs, "ConfigMap")["metadata"]["name"]  # the sync's repository
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"


def test_the_ingress_example_asks_oauth2_proxy_first() -> None:
    ingress = yaml.safe_load((CRONJOB / "components/dashboard/ingress-example.yaml").read_text())
    kubernetes_validate.validate(ingress, supported_versions()[1] + ".0", strict=True)
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/auth-url"].endswith("/oauth2/auth")
    assert "/oauth2/start" in annotations["nginx.ingress.kubernetes.io/auth-signin"]
