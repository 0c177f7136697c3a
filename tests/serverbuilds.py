"""Build the servers some tests run (Gitea, the Pushgateway) before those tests start.

A cold build of Gitea takes minutes (about 8 on 2 cores), far beyond a test's timeout;
so, like the control plane (`tests/kubeapi/fixtures.py`), they are built (or found
cached) once the tests are collected, and only if a collected test uses them.

Registered by ``tests/conftest.py`` through ``pytest_plugins``.
"""

from __future__ import annotations

import pytest

# fixture name -> the module whose ensure_built() makes what it runs
_BUILDS = {"gitea": "tests.gitea.build", "gateway": "tests.pushgateway.build"}


def pytest_collection_finish(session: pytest.Session) -> None:
    import importlib

    wanted = {
        fixture
        for item in session.items
        for fixture in getattr(item, "fixturenames", ())
        if fixture in _BUILDS
    }
    for fixture in sorted(wanted):
        importlib.import_module(_BUILDS[fixture]).ensure_built()
