"""Which tests keep to one xdist worker (``tests/session/workergroups.py``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections import OrderedDict
from pathlib import Path

import pytest

from tests.session.workergroups import GROUPS, LAST_UNIT, LastUnitScheduling, group_of, unit_of

TESTS = Path(__file__).parents[1]


def test_a_test_on_the_real_node_is_the_nodes_whatever_else_it_uses() -> None:
    assert group_of(["node_ecosystem", "real_node", "ecosystem_session", "tmp_path"]) == "node"


def test_the_servers_started_once_a_run_each_have_a_group() -> None:
    assert group_of(["ecosystem", "ecosystem_session"]) == "ecosystem"
    assert group_of(["cluster", "training_operator", "control_plane"]) == "kubeflow"
    assert group_of(["gitea", "kubeapi"]) == "gitea"
    assert group_of(["multikueue", "multikueue_clusters", "tmp_path"]) == "multikueue"
    # the real node's MultiKueue: another module's, which another worker may run at once
    assert group_of(["multikueue_node", "tmp_path"]) == "multikueue-node"


def test_a_test_on_the_control_plane_alone_may_run_on_any_worker() -> None:
    assert group_of(["kubeapi", "control_plane", "tmp_path_factory"]) is None


def test_the_collected_tests_carry_their_group_where_xdist_reads_it(
    request: pytest.FixtureRequest,
) -> None:
    """The marks are made before xdist's own hook renames the tests by group (which
    pytest 9.2's structured node ids silently undo: pytest is kept below it)."""
    in_worker = "PYTEST_XDIST_WORKER" in os.environ and request.config.getvalue("loadgroup")
    for item in request.session.items:
        unit = unit_of(item)
        marks = [m.args[0] for m in item.iter_markers("xdist_group")]
        assert marks == ([unit] if unit else []), item.nodeid
        if in_worker and unit:
            assert item.nodeid.endswith(f"@{unit}"), item.nodeid


class Worker:
    def __init__(self) -> None:
        self.sent: list[list[int]] = []
        self.shut = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.append(indexes)

    def shutdown(self) -> None:
        self.shut = True


def test_the_last_unit_waits_for_every_other_and_goes_to_its_groups_worker() -> None:
    units = ["node", "a", f"node{LAST_UNIT}", "b"]
    scheduler = LastUnitScheduling.__new__(LastUnitScheduling)  # no xdist session
    scheduler.workqueue = OrderedDict((u, {f"t@{u}": False}) for u in units)
    scheduler.assigned_work = {}
    first, second = Worker(), Worker()
    scheduler.registered_collections = {w: [f"t@{u}" for u in units] for w in (first, second)}

    def hand(worker: Worker) -> None:
        scheduler._assign_work_unit(worker)  # type: ignore[arg-type]

    hand(first)
    hand(second)
    hand(first)  # the last unit is not taken while another is left, even by its worker
    assert (first.sent, second.sent) == ([[0], [3]], [[1]])
    hand(second)  # what is left is the other worker's: this one stops
    assert second.shut and second.sent == [[1]]
    hand(first)
    assert first.sent == [[0], [3], [2]] and not scheduler.workqueue


def test_the_node_and_the_longest_groups_are_handed_out_first() -> None:
    units = ["a", "kubeflow", "faults", "b", "multikueue", "node"]
    scheduler = LastUnitScheduling.__new__(LastUnitScheduling)  # no xdist session
    scheduler.workqueue = OrderedDict((u, {f"t@{u}": False}) for u in units)
    scheduler.assigned_work = {}
    workers = [Worker() for _ in range(3)]
    scheduler.registered_collections = {w: [f"t@{u}" for u in units] for w in workers}
    for worker in [*workers, *workers]:
        scheduler._assign_work_unit(worker)  # type: ignore[arg-type]
    handed = [[units[i] for sent in w.sent for i in sent] for w in workers]
    assert handed == [["node", "kubeflow"], ["multikueue", "a"], ["faults", "b"]]


def test_every_group_names_a_fixture_of_the_suite() -> None:
    sources = "\n".join(path.read_text() for path in TESTS.rglob("*.py"))
    for fixture in GROUPS:
        assert re.search(rf"@pytest\.fixture\(.*\)\ndef {fixture}\(", sources), fixture


def test_a_groups_server_stops_after_the_last_test_using_it_not_at_the_sessions_end(
    tmp_path: Path,
) -> None:
    """The ecosystem's control plane is stopped once the next test does not use it (and
    started anew for a later one); the real node stays until the session's end."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent("""
        import pytest
        pytest_plugins = ["tests.session.workergroups"]
        LOG = []

        @pytest.fixture(scope="session")
        def ecosystem_session():
            LOG.append("ecosystem up")
            yield
            LOG.append("ecosystem down")

        @pytest.fixture(scope="session")
        def real_node():
            LOG.append("node up")
            yield
            LOG.append("node down")
        """)
    )
    (tmp_path / "test_order.py").write_text(
        textwrap.dedent("""
        from conftest import LOG

        def test_a(ecosystem_session, real_node):
            pass

        def test_b(ecosystem_session):
            assert LOG == ["ecosystem up", "node up"]

        def test_c(real_node):
            assert LOG == ["ecosystem up", "node up", "ecosystem down"]

        def test_d(ecosystem_session):
            assert LOG == ["ecosystem up", "node up", "ecosystem down", "ecosystem up"]
        """)
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path,
        # (the session's own options, such as -p plugins, are not this run's)
        env={**os.environ, "PYTHONPATH": str(TESTS.parent), "PYTEST_ADDOPTS": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout
