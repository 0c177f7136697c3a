"""Build the servers some tests run (Gitea, the Pushgateway, Kubeflow's training
operator, the JobSet and Kueue controllers) before those tests start.

A cold build of Gitea takes minutes (about 8 on 2 cores), far beyond a test's timeout;
so, like the control plane (`tests/kubeapi/fixtures.py`), they are built (or found
cached) once the tests are collected, and only if a collected test uses them.

A build that fails does not stop the session: its one line (`gobuild.BuildFailed`) is
printed at once, and every test whose fixture needs that part errors with it, since
the fixture asks for the part again. The other tests run.

Registered by ``tests/conftest.py`` through ``pytest_plugins``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

import pytest

from tests.builds.gobuild import BuildFailed


def build_now(make: Callable[[], object]) -> None:
    """`make()`; a failed build is said in its one line and left to the tests that need
    the part."""
    try:
        make()
    except BuildFailed as failure:
        print(f"build failed: {failure.msg}", file=sys.__stderr__, flush=True)


def _module(name: str) -> Callable[[], object]:
    """The build of a module whose ensure_built() makes what its fixture runs."""
    return lambda: importlib.import_module(name).ensure_built()


def _controllers() -> None:
    from tests.ecosystem.build import COMPONENTS, ensure_built

    for component in COMPONENTS.values():
        ensure_built(component)


# fixture name -> what builds what it runs
_BUILDS: dict[str, Callable[[], object]] = {
    "gitea": _module("tests.gitea.build"),
    "node_gitea": _module("tests.gitea.build"),  # tests/node/test_receiver.py's
    "gateway": _module("tests.pushgateway.build"),
    "training_operator": _module("tests.kubeflow.build"),
    "ecosystem_session": _controllers,
    "node_ecosystem": _controllers,
    "multikueue_clusters": _controllers,
    "multikueue_node": _controllers,
    "recorded_training": _controllers,  # its queued job (tests/helpers/recordedrun.py)
    "fault_jobset": _controllers,  # tests/faults/
}


def pytest_collection_finish(session: pytest.Session) -> None:
    wanted = {
        fixture
        for item in session.items
        for fixture in getattr(item, "fixturenames", ())
        if fixture in _BUILDS
    }
    for fixture in sorted(wanted):
        build_now(_BUILDS[fixture])
