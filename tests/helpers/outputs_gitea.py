"""Helpers of `tests/outputs/test_gitea.py` that other test modules use too."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.gitea.server import Gitea


@pytest.fixture(scope="module")
def gitea(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gitea]:
    with Gitea(tmp_path_factory.mktemp("gitea")) as server:
        yield server
