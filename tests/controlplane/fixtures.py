"""pytest fixtures for the real node: ``real_node`` is a second real control plane,
started once per session, whose node is the real one of ``node.py`` (kubelet,
containerd, runc, CNI, kube-proxy, CoreDNS) with the training image imported; the
``kubeapi`` fixture's control plane keeps its fake kubelet. ``node_cluster`` hands it
to one test, with every object the previous test made removed.

A test that uses them runs in every ``pytest`` run, CI's included: if the node cannot
be built or started, the test fails with the reason; it never skips.

Registered by ``tests/conftest.py`` through ``pytest_plugins``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .harness import RealCluster


@pytest.fixture(scope="session")
def real_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    from .node import real_node_cluster
    from .rootfs import training_archive

    directory = tmp_path_factory.mktemp("realnode")
    with (
        real_node_cluster(directory, images=[training_archive()]) as plane,
        RealCluster(plane, directory / "kubeconfig", fake_node=False) as real,
    ):
        yield real


@pytest.fixture
def node_cluster(real_node: RealCluster) -> Iterator[RealCluster]:
    real_node.wipe()
    real_node.clear_log()
    yield real_node
