"""Which tests keep to one xdist worker (``tests/workergroups.py``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.workergroups import GROUPS, group_of

TESTS = Path(__file__).parent


def test_a_test_on_the_real_node_is_the_nodes_whatever_else_it_uses() -> None:
    assert group_of(["node_ecosystem", "real_node", "ecosystem_session", "tmp_path"]) == "node"


def test_the_servers_started_once_a_run_each_have_a_group() -> None:
    assert group_of(["ecosystem", "ecosystem_session"]) == "ecosystem"
    assert group_of(["cluster", "training_operator", "control_plane"]) == "kubeflow"
    assert group_of(["gitea", "kubeapi"]) == "gitea"


def test_a_test_on_the_control_plane_alone_may_run_on_any_worker() -> None:
    assert group_of(["kubeapi", "control_plane", "tmp_path_factory"]) is None


def test_the_collected_tests_carry_their_group_where_xdist_reads_it(
    request: pytest.FixtureRequest,
) -> None:
    """The marks are made before xdist's own hook renames the tests by group."""
    in_worker = "PYTEST_XDIST_WORKER" in os.environ and request.config.getvalue("loadgroup")
    for item in request.session.items:
        group = group_of(getattr(item, "fixturenames", ()))
        marks = [m.args[0] for m in item.iter_markers("xdist_group")]
        assert marks == ([group] if group else []), item.nodeid
        if in_worker and group:
            assert item.nodeid.endswith(f"@{group}"), item.nodeid


def test_every_group_names_a_fixture_of_the_suite() -> None:
    sources = "\n".join(path.read_text() for path in TESTS.rglob("*.py"))
    for fixture in GROUPS:
        assert re.search(rf"@pytest\.fixture\(.*\)\ndef {fixture}\(", sources), fixture
