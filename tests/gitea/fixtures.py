"""pytest fixtures: ``gitea``, a real Gitea (``server.py``) for the whole session.

It starts in 7 to 13 s, so the modules that use it share one: their tests run on one
worker (group ``gitea``, ``tests/session/workergroups.py``), each on repositories of its own.
A test that stops it (``tests/faults/test_service_faults.py``) starts it again before
it ends. Registered by ``tests/conftest.py`` through ``pytest_plugins``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.gitea.server import Gitea


@pytest.fixture(scope="session")
def gitea(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gitea]:
    with Gitea(tmp_path_factory.mktemp("gitea")) as server:
        yield server
