"""Helpers of `test_jobset_faults.py` that other test modules use too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ecosystem.fixtures import Ecosystem
from tests.faults.conftest import FaultCluster
from tests.helpers.node_faults import (
    PODS,
)
from tests.helpers.node_training import NS


@pytest.fixture(scope="module")
def fault_jobset(
    fault_node: FaultCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ecosystem]:
    """The real JobSet controller beside the fault node's control plane (no Kueue)."""
    from tests.ecosystem.addons import Ecosystem as Controllers

    controllers = Controllers(fault_node.cluster.plane, tmp_path_factory.mktemp("fault-jobset"))
    controllers.start(kueue=False)
    try:
        eco = Ecosystem(fault_node.cluster)
        yield eco
    finally:
        controllers.uninstall()


def the_jobset(eco: Ecosystem, name: str) -> dict[str, Any]:
    (jobset,) = [j for j in eco.jobsets(NS) if j["metadata"]["name"].startswith(f"{name}-")]
    return jobset


def gang_running(eco: Ecosystem, jobset: str) -> list[dict[str, Any]] | None:
    pods = [p for p in eco.pods(jobset, NS) if not p["metadata"].get("deletionTimestamp")]
    ok = len(pods) == PODS and all(p["status"].get("phase") == "Running" for p in pods)
    return pods if ok else None
