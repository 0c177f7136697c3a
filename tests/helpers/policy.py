"""The operator's policy and tenancy in tests: manifests that pass or violate each key,
the teams overlay, and cronjob/'s RBAC with a verb taken away."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.manifests import policy
from mxgitops.manifests.loading import LoadResult, load
from tests.helpers.cronjob import CRONJOB

DIALECTS = ("seed", "kubeflow")


def manifest(
    dialect: str,
    name: str = "train",
    *,
    namespace: str | None = None,
    workers: int = 1,
    image: str = "mxnet:1.9",
    container: dict[str, Any] | None = None,
    pod: dict[str, Any] | None = None,
) -> str:
    """A dist job (scheduler, server, `workers` workers), every pod template alike."""

    def template() -> dict[str, Any]:
        mxnet = {"name": "mxnet", "image": image, **(container or {})}
        return {"spec": {"containers": [mxnet], **(pod or {})}}

    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    counts = {"Scheduler": 1, "Server": 1, "Worker": workers}
    if dialect == "seed":
        spec: dict[str, Any] = {
            "jobMode": "dist",
            "replicaSpecs": [
                {"replicas": n, "mxReplicaType": kind.upper(), "template": template()}
                for kind, n in counts.items()
            ],
        }
        head = {"apiVersion": "mxnet.mlkube.io/v1beta1", "kind": "MxJob"}
    else:
        spec = {
            "jobMode": "MXTrain",
            "mxReplicaSpecs": {
                kind: {"replicas": n, "restartPolicy": "Never", "template": template()}
                for kind, n in counts.items()
            },
        }
        head = {"apiVersion": "kubeflow.org/v1", "kind": "MXJob"}
    return yaml.safe_dump({**head, "metadata": metadata, "spec": spec}, sort_keys=False)


LIMITS = {"resources": {"limits": {"cpu": "2", "memory": "4Gi"}}}


def gpus(count: int) -> dict[str, Any]:
    return {"resources": {"limits": {"nvidia.com/gpu": count}}}


# key -> (its strict value, a looser one, the manifest's arguments that pass the loose
# value and not the strict one, arguments that pass both)
KEYS: dict[str, tuple[Any, Any, dict[str, Any], dict[str, Any]]] = {
    "allowedNamespaces": (["ml"], ["ml", "other"], {"namespace": "other"}, {"namespace": "ml"}),
    "podSecurity": ("restricted", "baseline", {}, {
        "container": {"securityContext": {
            "allowPrivilegeEscalation": False, "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"}, "capabilities": {"drop": ["ALL"]}}}
    }),
    "allowedImages": (
        ["registry.example.com/ml/"],
        ["registry.example.com/"],
        {"image": "registry.example.com/other/mxnet:1"},
        {"image": "registry.example.com/ml/mxnet:1"},
    ),
    "requireResourceLimits": (True, False, {}, {"container": LIMITS}),
    "maxReplicasPerJob": (3, 10, {"workers": 2}, {"workers": 1}),
    # One GPU in every pod: the scheduler's and the server's count too.
    "maxGpusPerJob": (3, 10, {"workers": 3, "container": gpus(1)}, {"container": gpus(1)}),
    "allowedServiceAccounts": (
        ["trainer"], ["trainer", "admin"],
        {"pod": {"serviceAccountName": "admin"}}, {"pod": {"serviceAccountName": "trainer"}},
    ),
    "allowedPriorityClasses": (
        ["batch-low"], ["batch-low", "batch-high"],
        {"pod": {"priorityClassName": "batch-high"}}, {"pod": {"priorityClassName": "batch-low"}},
    ),
}  # fmt: skip


def checked(
    tmp_path: Path, text: str, operator: dict[str, Any], repo: dict[str, Any]
) -> LoadResult:
    (tmp_path / "jobs").mkdir(exist_ok=True)
    (tmp_path / "jobs" / "train.yaml").write_text(text)
    rules = policy.combine(
        policy.parse(operator, where="operator", source=policy.OPERATOR),
        policy.parse(repo, where="repository", source=policy.REPOSITORY),
    )
    return load(tmp_path / "jobs", default_namespace="ml", policy=rules)


def policy_messages(result: LoadResult) -> list[str]:
    return [p.message for p in result.problems if p.message.startswith("policy: ")]


STRICT = {key: value[0] for key, value in KEYS.items()}


def violating_everything(dialect: str, name: str = "train") -> str:
    return manifest(
        dialect,
        name,
        namespace="other",
        workers=3,
        image="docker.io/anyone/mxnet",
        container=gpus(1),
        pod={"serviceAccountName": "admin", "priorityClassName": "batch-high"},
    )


def passing_everything() -> dict[str, Any]:
    """The manifest's arguments that pass every key's strict value."""
    passing: dict[str, Any] = {}
    for value in KEYS.values():
        for name, argument in value[3].items():
            if isinstance(argument, dict) and isinstance(passing.get(name), dict):
                argument = _merge(passing[name], argument)
            passing[name] = argument
    passing["container"] = _merge(passing["container"], LIMITS)
    return passing


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, value in b.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merge(out[key], value) if both else value
    return out


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("MXGITOPS_POLICY_FILE", "MXGITOPS_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "jobs").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


TEAMS = CRONJOB / "overlays/teams"


TENANT = CRONJOB / "components/tenancy/tenant.yaml"


RESTRICTED = {
    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
    "securityContext": {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        "capabilities": {"drop": ["ALL"]},
    },
}


def _collection(doc: dict[str, Any], namespace: str) -> str:
    if doc["kind"] == "ServiceAccount":
        return f"/api/v1/namespaces/{namespace}/serviceaccounts"
    plural = {"Role": "roles", "RoleBinding": "rolebindings"}[doc["kind"]]
    return f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/{plural}"


RBAC = "/apis/rbac.authorization.k8s.io/v1"


def role_path(role: dict[str, Any]) -> str:
    meta = role["metadata"]
    if role["kind"] == "Role":
        return f"{RBAC}/namespaces/{meta['namespace']}/roles/{meta['name']}"
    return f"{RBAC}/clusterroles/{meta['name']}"


def without(role: dict[str, Any], index: int, verb: str) -> dict[str, Any]:
    reduced = copy.deepcopy(role)
    rule = reduced["rules"][index]
    rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    if not rule["verbs"]:
        del reduced["rules"][index]
    return reduced
