"""Helpers of `tests/e2e/test_ttl_real.py` that other test modules use too."""

from __future__ import annotations

from typing import Any

from tests.controlplane.harness import wait_for
from tests.helpers.reconcile_e2e import (
    NS,
)


def canary(real: Any, name: str) -> None:
    """A plain batch Job with the same TTL, finished now; returns once the real TTL
    controller has deleted it: whatever finished before it and carried the TTL is gone."""
    container = {"name": "c", "image": "busybox", "command": ["true"]}
    real.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "ttlSecondsAfterFinished": 1,
                "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
            },
        },
        NS,
    )
    real.run_job_controller(NS)
    real.kubelet(job=name, namespace=NS, phase="Succeeded")
    wait_for(f"for the TTL controller to delete {name}", lambda: real.get("Job", name, NS) is None)
