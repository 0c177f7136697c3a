"""Helpers of `tests/runtimes/test_batch_status.py` that other test modules use too."""

from __future__ import annotations

from typing import Any

from mxgitops import model


def terminated(code: int, message: str = "", reason: str = "") -> dict[str, Any]:
    state: dict[str, Any] = {"exitCode": code}
    if message:
        state["message"] = message
    if reason:
        state["reason"] = reason
    return {"terminated": state}


RUNNING = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}


def pod(
    state: dict[str, Any] | None = None,
    *,
    last: dict[str, Any] | None = None,
    started: str | None = "2026-01-01T00:00:00Z",
    created: str = "2026-01-01T00:00:00Z",
    name: str = "p",
    container: str = "mxnet",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if started:
        status["startTime"] = started
    if state is not None:
        entry: dict[str, Any] = {"name": container, "state": state}
        if last is not None:
            entry["lastState"] = last
        status["containerStatuses"] = [entry]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "creationTimestamp": created, "labels": labels or {}},
        "status": status,
    }


def batch_job(
    succeeded: int = 0,
    conditions: list[dict[str, str]] | None = None,
    *,
    restart: model.RestartPolicy | None = None,
    failed: int = 0,
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if succeeded:
        status["succeeded"] = succeeded
    if failed:
        status["failed"] = failed
    if conditions:
        status["conditions"] = conditions
    metadata: dict[str, Any] = {"name": "j"}
    if restart is not None:
        metadata["annotations"] = {"mxgitops.io/restart-policy": restart.value}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "status": status}


NEVER, ON_FAILURE, EXIT_CODE = (model.RestartPolicy(p) for p in ("Never", "OnFailure", "ExitCode"))


def failed_pod(state: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    failed = pod(state, **kwargs)
    failed["status"]["phase"] = "Failed"
    return failed
