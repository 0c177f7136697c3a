"""Helpers of `tests/deploy/test_rbac.py` that other test modules use too."""

from __future__ import annotations

import copy
from typing import Any

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
