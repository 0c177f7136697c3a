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

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import RealCluster

NODE_FIXTURES = frozenset(
    {"real_node", "node_cluster", "multikueue_node", "fault_node"}  # fault_node: tests/faults/
)


def node_images() -> list[Path]:
    """The images the node's tests run, built (or found cached) on first use."""
    from .projectimage import project_archive
    from .rootfs import training_archive

    return [training_archive(), project_archive()]


def _uses_node(item: pytest.Item) -> bool:
    return bool(NODE_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--backend double`` (the fast path while developing) runs no real Kubernetes:
    the node's tests are deselected with the real backend's, never skipped. CI runs
    both backends, so it runs them."""
    if config.getoption("--backend") != "double":
        return
    drop = [item for item in items if _uses_node(item)]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [item for item in items if not _uses_node(item)]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the node's binaries and images before the first test that needs them, so
    that a cold build (minutes) is not counted against that test's timeout.

    Under xdist the first worker alone builds the images here (the project's own is
    rebuilt whenever ``mxgitops/`` changed, about a minute): the others go on to their
    first tests, most of which run no node, instead of all waiting for one build; a
    test of theirs that needs the images first waits for that build in its fixture
    (the image cache's lock)."""
    if any(_uses_node(item) for item in session.items):
        from tests.builds.servers import build_now

        from .nodebuild import ensure_node_built

        build_now(ensure_node_built)
        if os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0":
            build_now(node_images)


@pytest.fixture(scope="session")
def real_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    from .node import real_node_cluster

    directory = tmp_path_factory.mktemp("realnode")
    with (
        real_node_cluster(directory, images=node_images()) as plane,
        RealCluster(plane, directory / "kubeconfig", fake_node=False) as real,
    ):
        yield real


@pytest.fixture
def node_cluster(real_node: RealCluster) -> Iterator[RealCluster]:
    real_node.wipe()
    real_node.clear_log()
    yield real_node
