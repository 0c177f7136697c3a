"""pytest fixtures: ``kubeapi`` (function scope) yields a running :class:`KubeAPI`.

Registered by ``tests/conftest.py`` through ``pytest_plugins``.  Schemas are
loaded once per process, so starting a double per test costs a few
milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import KubeAPI


@pytest.fixture
def kubeapi(tmp_path: Path) -> Iterator[KubeAPI]:
    api = KubeAPI(tmp_path / "kubeconfig")
    try:
        yield api
    finally:
        api.stop()
