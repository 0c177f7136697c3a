"""Helpers of `test_runtime_faults.py` that other test modules use too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.images import TOOLBOX_IMAGE
from tests.controlplane.node import NODE_NAME
from tests.faults.conftest import FaultCluster
from tests.helpers.node_faults import (
    dist_job,
)
from tests.helpers.node_training import NS

HIGH = "mxgitops-fault-high"


def allocatable_millicpu(cluster: RealCluster) -> int:
    cpu = str(cluster.rest.get(f"/api/v1/nodes/{NODE_NAME}")["status"]["allocatable"]["cpu"])
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


def sized_job(cluster: RealCluster, name: str) -> str:
    """A dist job (`Never`, `backoffLimit: 0`) whose 4 pods take 60 % of the node's CPU."""
    doc = yaml.safe_load(dist_job(name, "Never", backoffLimit=0))
    share = f"{allocatable_millicpu(cluster) * 15 // 100}m"
    for role in doc["spec"]["mxReplicaSpecs"].values():
        (container,) = role["template"]["spec"]["containers"]
        container["resources"]["requests"]["cpu"] = share
    return yaml.safe_dump(doc)


@pytest.fixture
def high_priority(faults: FaultCluster) -> Iterator[str]:
    """A PriorityClass above every job's (none names one: priority 0)."""
    path = "/apis/scheduling.k8s.io/v1/priorityclasses"
    faults.cluster.rest.create(
        path,
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": HIGH},
            "value": 1000000,
        },
    )
    yield HIGH
    faults.cluster.raw("DELETE", f"{path}/{HIGH}")


def preemptor(cluster: RealCluster) -> dict[str, Any]:
    """A pod of the higher priority that needs half the node: it fits only once a pod of
    the job is preempted. It runs a moment and ends, giving the node back."""
    cpu = f"{allocatable_millicpu(cluster) // 2}m"
    container = {
        "name": "c",
        "image": TOOLBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", "sleep 1"],
        "resources": {"requests": {"cpu": cpu}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "preemptor", "namespace": NS},
        "spec": {
            "priorityClassName": HIGH,
            "restartPolicy": "Never",
            "containers": [container],
            "terminationGracePeriodSeconds": 1,
        },
    }


def preempt(cluster: RealCluster) -> None:
    """Create the higher pod and wait until it ran (so a pod of the job was preempted)."""
    cluster.create(preemptor(cluster), NS)
    wait_for(
        "the preemptor to run and end",
        lambda: (
            (cluster.get("Pod", "preemptor", NS) or {}).get("status", {}).get("phase")
            == "Succeeded"
        ),
        90,
    )
