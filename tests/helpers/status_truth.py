"""Helpers of `tests/outputs/test_status_truth.py` that other test modules use too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mxgitops.settings.config import SyncConfig
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.reconcile_e2e import (
    INSTANCE,
    NS,
)
from tests.helpers.sync_git_e2e import config_for
from tests.kubeapi.harness import KubeAPI


def files(*docs: dict[str, Any]) -> dict[str, str]:
    return {f"jobs/{d['metadata']['name']}.yaml": yaml.safe_dump(d) for d in docs}


def git_config(remote: GitRemote, api: KubeAPI, tmp_path: Path, **overrides: Any) -> SyncConfig:
    return config_for(
        remote.url, tmp_path / "cache", api, namespace=NS, instance=INSTANCE, **overrides
    )
