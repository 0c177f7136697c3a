"""The fault suite's node: a real control plane and real node of its own, started once
per session on the fault group's worker (``tests/session/workergroups.py``), so that killing
its processes or cutting its network never reaches the node the other tests share.

It differs from ``real_node`` only where a fault needs it, each wait shortened by the
component's own flag:

* the node lifecycle and taint eviction controllers run (the shared node's control
  plane leaves them out): a node that stops reporting goes NotReady after
  ``--node-monitor-grace-period=16s`` (default 50 s), checked every
  ``--node-monitor-period=1s`` (default 5 s);
* kubelet renews its Lease every 2 s (``nodeLeaseDurationSeconds: 8``, default 40)
  and posts its status every 4 s (``nodeStatusUpdateFrequency``, default 10 s), so
  that the shorter grace period never flaps on a busy machine;
* a pod tolerates its node NotReady or unreachable for 2 s
  (``--default-not-ready-toleration-seconds`` and
  ``--default-unreachable-toleration-seconds`` of kube-apiserver, default 300 s)
  before the taint manager evicts it;
* a standby Node, tainted so that nothing is scheduled on it, keeps renewing its
  Lease: with every node of a zone NotReady the node lifecycle controller assumes the
  control plane lost them and evicts nothing (its ``FullDisruption`` state), which is
  right for a real cluster and would make the node-lost case impossible to show.

Every fault test restores what it broke (starts the process again, brings the network
back) and ends by proving the node runs a new pod (``node_runs_a_pod``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane.fixtures import node_images
from tests.controlplane.harness import RealCluster
from tests.controlplane.node import RealNode

STANDBY = "mxgitops-standby"
STANDBY_TAINT = {"key": "mxgitops.io/standby", "effect": "NoSchedule"}
GRACE = 16  # seconds, the node lifecycle's --node-monitor-grace-period
TOLERATION = 2  # seconds, the API server's default NotReady/unreachable toleration
FLAGS = {
    "kube-controller-manager": (
        f"--node-monitor-grace-period={GRACE}s",
        "--node-monitor-period=1s",
    ),
    "kube-apiserver": (
        f"--default-not-ready-toleration-seconds={TOLERATION}",
        f"--default-unreachable-toleration-seconds={TOLERATION}",
    ),
}
KUBELET = {"nodeLeaseDurationSeconds": 8, "nodeStatusUpdateFrequency": "4s"}


@dataclass
class FaultCluster:
    """The fault node's cluster (``RealCluster``) and the node itself, to break."""

    cluster: RealCluster
    node: RealNode


def _microtime() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Standby:
    """A Node that stays Ready (its Lease renewed every second) and runs nothing."""

    def __init__(self, cluster: RealCluster) -> None:
        self.rest = cluster.rest
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="standby-node", daemon=True)

    def start(self) -> _Standby:
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": STANDBY},
            "spec": {"taints": [STANDBY_TAINT]},
        }
        self.rest.create("/api/v1/nodes", node)
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
        self.rest.patch(f"/api/v1/nodes/{STANDBY}/status", {"status": {"conditions": [ready]}})
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": STANDBY, "namespace": "kube-node-lease"},
            "spec": {
                "holderIdentity": STANDBY,
                "leaseDurationSeconds": 8,
                "renewTime": _microtime(),
            },
        }
        self.rest.create("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", lease)
        self._thread.start()
        return self

    def _renew(self) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{STANDBY}"
        while not self._stop.wait(1.0):  # a kubelet's renewal period, not a wait on a test
            try:
                self.rest.patch(path, {"spec": {"renewTime": _microtime()}})
            except Exception:  # the API server is down in some faults: renew later
                continue

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.fixture(scope="session")
def fault_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultCluster]:
    from tests.controlplane.node import real_node_cluster

    directory = tmp_path_factory.mktemp("faultnode")
    started: list[RealNode] = []
    with (
        real_node_cluster(
            directory,
            images=node_images(),
            extra_controllers=("node-lifecycle-controller", "taint-eviction-controller"),
            flags=FLAGS,
            kubelet_overrides=KUBELET,
            started=started,
        ) as plane,
        RealCluster(plane, directory / "kubeconfig", fake_node=False) as real,
    ):
        standby = _Standby(real).start()
        try:
            yield FaultCluster(real, started[0])
        finally:
            standby.stop()


@pytest.fixture
def faults(fault_node: FaultCluster, tmp_path: Path) -> Iterator[FaultCluster]:
    fault_node.cluster.wipe()
    fault_node.cluster.clear_log()
    yield fault_node
