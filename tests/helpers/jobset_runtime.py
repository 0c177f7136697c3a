"""Helpers of `tests/runtimes/test_jobset.py` that other test modules use too."""

from __future__ import annotations

from typing import Any

from mxgitops.manifests.spec import from_manifest
from mxgitops.runtimes.shared.podtemplate import RenderContext
from tests.helpers.reconcile_e2e import mxjob

CTX = RenderContext("prod")


def job_of(doc: dict[str, Any], runtime: str = "jobset") -> Any:
    return from_manifest(doc, default_namespace="ml", default_runtime=runtime)


def queued(name: str = "a", queue: str = "team", **policy: Any) -> dict[str, Any]:
    return mxjob(name, runPolicy={"schedulingPolicy": {"queue": queue, **policy}})
