"""Helpers of `tests/e2e/test_policy_sync.py` that other test modules use too."""

from __future__ import annotations

from typing import Any

from tests.helpers.sync_git_e2e import NS


def job_names(kubeapi: Any) -> set[str]:
    return {o["metadata"]["name"] for o in kubeapi.objects("jobs", NS)}
