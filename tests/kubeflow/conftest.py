"""The differential suite's fixtures: Kubeflow's training operator beside mxgitops,
on the real control plane (they judge; the API double has no CRDs to run it on)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.controlplane.harness import RealCluster, wait_for
from tests.helpers.sync import NS
from tests.kubeflow.operator import MXJOBS, TrainingOperator

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--backend double` leaves this suite out, as it leaves out every test of the
    real backend: the operator runs on the real control plane only (deselected,
    never skipped; CI runs both backends)."""
    if config.getoption("--backend") != "double":
        return
    mine = [
        item
        for item in items
        if HERE in Path(str(item.path)).parents and "cluster" in getattr(item, "fixturenames", ())
    ]
    if mine:
        config.hook.pytest_deselected(items=mine)
        items[:] = [item for item in items if item not in mine]


@pytest.fixture(scope="session")
def training_operator(
    control_plane: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TrainingOperator]:
    with TrainingOperator(control_plane, tmp_path_factory.mktemp("kubeflow")) as operator:
        yield operator


def remove_mxjobs(real: RealCluster) -> None:
    path = MXJOBS.format(namespace=NS)
    for job in real.rest.get(path)["items"]:
        real.rest.delete(f"{path}/{job['metadata']['name']}", {"propagationPolicy": "Background"})
    wait_for("for the MXJobs of the last test to go", lambda: not real.rest.get(path)["items"])


@pytest.fixture
def cluster(
    training_operator: TrainingOperator, control_plane: RealCluster
) -> Iterator[RealCluster]:
    """The real cluster with the operator running, emptied before and after the test."""
    remove_mxjobs(control_plane)
    control_plane.wipe()
    yield control_plane
    remove_mxjobs(control_plane)
    control_plane.wipe()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    return path
