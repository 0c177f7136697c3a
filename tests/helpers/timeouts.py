"""Helpers of `tests/kube/test_timeouts.py` that other test modules use too."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.reconcile_e2e import INSTANCE, NS
from tests.kubeapi.harness import KubeAPI


def sync_args(api: KubeAPI, repo: Path, *extra: str) -> list[str]:
    return [
        "sync",
        "--repo",
        str(repo),
        "--kubeconfig",
        str(api.kubeconfig),
        "--namespace",
        NS,
        "--instance",
        INSTANCE,
        "--no-notes",
        *extra,
    ]
