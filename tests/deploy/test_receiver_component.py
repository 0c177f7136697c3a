"""cronjob/components/receiver over the example overlay, built with the real kubectl: its
objects pass strict schema validation, its pod Pod Security `restricted`, it runs the
CronJob's image with another command, its Role grants exactly what `mxgitops receive`
asks (tests/receiver/test_process.py holds that to the real authorizer), and the CronJob's
name follows the overlay's nameSuffix wherever the component names it."""

from __future__ import annotations

import shutil

import kubernetes_validate
import pytest

from mxgitops.cli import receive
from tests.helpers.cronjob import (
    CRONJOB,
    Docs,
    granted,
    kustomize,
    only,
    supported_versions,
    violations,
)

RECEIVER = {
    ("batch", "cronjobs"): {"get"},
    ("batch", "jobs"): {"create", "list", "watch"},
}


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Docs:
    """The example overlay, as a user copies it, with the receiver's component."""
    copy = tmp_path_factory.mktemp("receiver") / "cronjob"
    shutil.copytree(CRONJOB, copy)
    overlay = copy / "overlays/example/kustomization.yaml"
    overlay.write_text(overlay.read_text() + "components:\n  - ../../components/receiver\n")
    return kustomize(overlay.parent)


def receiver_docs(docs: Docs) -> Docs:
    return [d for d in docs if d["metadata"]["name"].startswith("mxgitops-receiver")]


def test_the_component_adds_the_receiver_in_the_instances_namespace(docs: Docs) -> None:
    kinds = sorted(d["kind"] for d in receiver_docs(docs))
    assert kinds == ["Deployment", "Role", "RoleBinding", "Service", "ServiceAccount"]
    for doc in receiver_docs(docs):
        assert doc["metadata"]["name"] == "mxgitops-receiver-example"
        assert doc["metadata"]["namespace"] == "mxgitops-example"
    (binding,) = [d for d in receiver_docs(docs) if d["kind"] == "RoleBinding"]
    (subject,) = binding["subjects"]
    assert (subject["name"], subject["namespace"]) == (
        "mxgitops-receiver-example",
        "mxgitops-example",
    )


@pytest.mark.parametrize("end", ["oldest", "newest"])
def test_every_object_passes_strict_schema_validation(docs: Docs, end: str) -> None:
    version = supported_versions()[0 if end == "oldest" else 1] + ".0"
    for doc in receiver_docs(docs):
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_pod_passes_pod_security_restricted(docs: Docs) -> None:
    assert violations(only(docs, "Deployment")["spec"]["template"]) == []


def test_one_image_another_command_and_the_cronjobs_name(docs: Docs) -> None:
    deployment = only(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = deployment["containers"]
    cronjob = only(docs, "CronJob")
    (sync,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == sync["image"]
    assert container["command"] == ["mxgitops"] and container["args"][0] == "receive"
    env = {e["name"]: e for e in container["env"]}
    assert env["CRONJOB"]["value"] == cronjob["metadata"]["name"] == "mxgitops-example"
    assert "--cronjob=$(POD_NAMESPACE)/$(CRONJOB)" in container["args"]
    config = env["MXGITOPS_REF"]["valueFrom"]["configMapKeyRef"]["name"]
    assert config == only(docs, "ConfigMap")["metadata"]["name"]  # the sync's branch
    options = {f"--{p.name.replace('_', '-')}" for p in receive.params}
    assert {a.split("=")[0] for a in container["args"][1:]} <= options
    assert deployment["serviceAccountName"] == "mxgitops-receiver-example"
    secret = next(v for v in deployment["volumes"] if v["name"] == "webhook-secret")
    assert secret["secret"]["secretName"] == "mxgitops-webhook"


def test_the_role_grants_exactly_what_the_receiver_asks(docs: Docs) -> None:
    (role,) = [d for d in receiver_docs(docs) if d["kind"] == "Role"]
    assert granted([role], "Role") == RECEIVER
    (cronjobs,) = [r for r in role["rules"] if r["resources"] == ["cronjobs"]]
    assert cronjobs["resourceNames"] == ["mxgitops-example"]  # that CronJob only


def test_the_ingress_example_exposes_only_the_webhook() -> None:
    import yaml

    ingress = yaml.safe_load((CRONJOB / "components/receiver/ingress-example.yaml").read_text())
    kubernetes_validate.validate(ingress, supported_versions()[1] + ".0", strict=True)
    (rule,) = ingress["spec"]["rules"]
    assert [p["path"] for p in rule["http"]["paths"]] == ["/webhook"]
