"""cronjob/ in tests: the base and overlays built with the real kubectl, the CronJob's
command and environment, installed as its ServiceAccount."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from mxgitops.cli import main
from mxgitops.manifests.podsecurity import Level, check
from mxgitops.model import format_path
from mxgitops.settings import config
from tests.gitrepos.fixtures import GitRemote

ROOT = Path(__file__).resolve().parents[2]


CRONJOB = ROOT / "cronjob"


BASE, OVERLAY = CRONJOB / "base", CRONJOB / "overlays/example"


Docs = list[dict[str, Any]]


def kustomize(directory: Path) -> Docs:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(directory)], check=True, capture_output=True, text=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def only(docs: Docs, kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def pod_template(docs: Docs) -> dict[str, Any]:
    template: dict[str, Any] = only(docs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]
    return template


def supported_versions() -> tuple[str, str]:
    """The oldest and newest Kubernetes minor version the manual's install page names."""
    found = re.search(
        r"Kubernetes (1\.\d+) to (1\.\d+)",
        (ROOT / "docs" / "getting-started" / "cluster.md").read_text(),
    )
    assert found, "docs/getting-started/cluster.md names no supported Kubernetes versions"
    return found.group(1), found.group(2)


def violations(template: dict[str, Any]) -> list[str]:
    """What Pod Security `restricted` refuses in a pod template: mxgitops' own checks,
    which tests/manifests/test_podsecurity_real.py holds to the real admission."""
    return [f"{format_path(v.path)}: {v}" for v in check(template, Level.RESTRICTED)]


def granted(docs: Docs, kind: str) -> dict[tuple[str, str], set[str]]:
    rules: dict[tuple[str, str], set[str]] = {}
    for role in (d for d in docs if d["kind"] == kind):
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    rules.setdefault((group, resource), set()).update(rule["verbs"])
    return rules


EXAMPLE = Path(__file__).resolve().parents[2] / "jobs-repo-example"


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, git_isolation: None) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("MXGITOPS_"):
            monkeypatch.delenv(name)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    logger = logging.getLogger("mxgitops")
    saved = (logger.handlers[:], logger.propagate, logger.level)
    yield
    logger.handlers[:], logger.propagate, logger.level = saved


@pytest.fixture(scope="module")
def rendered() -> Docs:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    return kustomize(OVERLAY)


RBAC = "/apis/rbac.authorization.k8s.io/v1"


COLLECTIONS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "Role": RBAC + "/namespaces/{ns}/roles",
    "RoleBinding": RBAC + "/namespaces/{ns}/rolebindings",
    "ClusterRole": RBAC + "/clusterroles",
    "ClusterRoleBinding": RBAC + "/clusterrolebindings",
}


def install(real: Any, docs: Docs, kubeconfig: Path) -> list[str]:
    """Create the rendered objects as an admin would; write a kubeconfig of the
    ServiceAccount's token. Return the paths of the cluster-scoped objects made."""
    made = []
    for doc in docs:
        if doc["kind"] not in COLLECTIONS:
            continue
        path = COLLECTIONS[doc["kind"]].format(ns=doc["metadata"].get("namespace"))
        status, _, body = real.raw("POST", path, doc)
        assert status in (201, 409), body  # 409: made by an earlier run on this plane
        if doc["kind"] == "Namespace":
            real.ensure_namespace(doc["metadata"]["name"])
        elif doc["kind"].startswith("Cluster"):
            made.append(f"{path}/{doc['metadata']['name']}")
    account = only(docs, "ServiceAccount")["metadata"]
    account_kubeconfig(real, account["namespace"], account["name"], kubeconfig)
    return made


def account_kubeconfig(real: Any, namespace: str, account: str, kubeconfig: Path) -> Path:
    """Write a kubeconfig of a token of the ServiceAccount `namespace/account`."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"
    status, _, body = real.raw("POST", path, request)
    assert status == 201, body
    cluster = {"server": real.url, "certificate-authority": str(real.plane.pki.ca)}
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "real", "cluster": cluster}],
                "users": [{"name": account, "user": {"token": body["status"]["token"]}}],
                "contexts": [{"name": account, "context": {"cluster": "real", "user": account}}],
                "current-context": account,
            }
        )
    )
    return kubeconfig


def example_files() -> dict[str, str]:
    return {
        path.relative_to(EXAMPLE).as_posix(): path.read_text()
        for path in sorted(EXAMPLE.rglob("*"))
        if path.is_file()
    }


class CronJobRun:
    """The rendered CronJob's container, runnable in-process as the pod would run it."""

    def __init__(self, docs: Docs, remote: GitRemote, kubeconfig: Path, tmp_path: Path) -> None:
        cronjob = only(docs, "CronJob")
        self.namespace: str = cronjob["metadata"]["namespace"]
        spec = pod_template(docs)["spec"]
        (container,) = spec["containers"]
        self.argv: list[str] = [*container["command"], *container["args"]]
        mounts = {
            m["mountPath"]: tmp_path / "volumes" / m["name"] for m in container["volumeMounts"]
        }
        for directory in mounts.values():
            directory.mkdir(parents=True)
        env = self._env(docs, container)
        # The substitutions: repository, volumes, service account credential.
        assert env["MXGITOPS_REPO"].startswith("https://")
        env["MXGITOPS_REPO"] = remote.url
        env = {k: str(mounts.get(v, v)) for k, v in env.items()}
        env["KUBECONFIG"] = str(kubeconfig)
        self.env = env
        self.namespace_file = tmp_path / "serviceaccount/namespace"
        self.namespace_file.parent.mkdir()
        self.namespace_file.write_text(self.namespace)

    def _env(self, docs: Docs, container: dict[str, Any]) -> dict[str, str]:
        env: dict[str, str] = {}
        for source in container.get("envFrom", []):
            name = source["configMapRef"]["name"]
            (config_map,) = [d for d in docs if d["metadata"]["name"] == name]
            env.update(config_map["data"])
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = item["value"]
            else:  # an optional Secret that this test does not create: no token
                assert item["valueFrom"]["secretKeyRef"]["optional"] is True, item
        return env

    def __call__(self, monkeypatch: pytest.MonkeyPatch) -> Result:
        assert self.argv[0] == "mxgitops"  # the console script: mxgitops.cli:main
        monkeypatch.setattr(config, "SERVICE_ACCOUNT_NAMESPACE", self.namespace_file)
        return CliRunner().invoke(main, self.argv[1:], env=self.env)
