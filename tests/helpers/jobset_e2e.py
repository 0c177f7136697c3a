"""Helpers of `test_jobset_e2e.py` that other test modules use too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.ecosystem.fixtures import Ecosystem
from tests.helpers.reconcile_e2e import (
    NS,
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    return path


def only_jobset(eco: Ecosystem, job: str) -> dict[str, Any]:
    (found,) = [j for j in eco.jobsets(NS) if j["metadata"]["labels"].get("mxgitops.io/job") == job]
    return found
