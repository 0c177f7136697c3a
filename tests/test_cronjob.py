"""cronjob/: the kustomization builds with the real kubectl, its settings are real
options of `mxgitops sync`, and its RBAC grants what a sync does."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.cli import sync

CRONJOB = Path(__file__).resolve().parents[1] / "cronjob"
# What a sync does, per (API group, resource) — cluster.py, lease.py and sync.py.
NEEDED = {
    ("batch", "jobs"): {"list", "get", "create", "delete"},
    ("", "services"): {"list", "get", "create", "delete"},
    ("", "pods"): {"list"},
    ("coordination.k8s.io", "leases"): {"get", "create", "update"},
    ("", "configmaps"): {"get", "create", "update"},
}


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(CRONJOB)], check=True, capture_output=True, text=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_the_kustomization_builds(built: list[dict[str, Any]]) -> None:
    kinds = sorted(d["kind"] for d in built)
    assert kinds == sorted(
        [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ConfigMap",
            "CronJob",
        ]
    )
    (cronjob,) = [d for d in built if d["kind"] == "CronJob"]
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "mxgitops"
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"


def test_every_setting_of_the_config_is_an_option_of_sync(built: list[dict[str, Any]]) -> None:
    (config,) = [d for d in built if d["kind"] == "ConfigMap"]
    envvars = {p.envvar for p in sync.params if getattr(p, "envvar", None)}
    assert set(config["data"]) <= envvars, set(config["data"]) - envvars


def test_rbac_grants_what_a_sync_does(built: list[dict[str, Any]]) -> None:
    granted: dict[tuple[str, str], set[str]] = {}
    for role in (d for d in built if d["kind"] in ("ClusterRole", "Role")):
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    granted.setdefault((group, resource), set()).update(rule["verbs"])
    for key, verbs in NEEDED.items():
        assert verbs <= granted.get(key, set()), (key, verbs - granted.get(key, set()))
