"""Helpers of `tests/deploy/test_cronjob.py` that other test modules use too."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.manifests.podsecurity import Level, check
from mxgitops.model import format_path

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
