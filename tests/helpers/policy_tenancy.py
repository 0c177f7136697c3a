"""Helpers of `tests/e2e/test_policy_tenancy.py` that other test modules use too."""

from __future__ import annotations

from typing import Any

from tests.helpers.cronjob import CRONJOB

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
