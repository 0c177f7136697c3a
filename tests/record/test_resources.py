"""GPU-hours and CPU-core-hours from pod objects (mxgitops/record/resources.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from mxgitops.record.resources import resource_use

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def _pod(
    requests: dict[str, Any], start: str | None, finished: str | None, **extra: Any
) -> dict[str, Any]:
    state = {"terminated": {"finishedAt": finished}} if finished else {"running": {}}
    status: dict[str, Any] = {"containerStatuses": [{"name": "mxnet", "state": state}]}
    if start:
        status["startTime"] = start
    container = {"name": "mxnet", "resources": {"requests": requests}}
    return {"spec": {"containers": [container], **extra}, "status": status}


def test_finished_pods_requests_times_their_running_time() -> None:
    pods = [
        _pod({"cpu": "2", "nvidia.com/gpu": "1"}, "2026-12-07T10:00:00Z", "2026-12-07T11:30:00Z"),
        _pod({"cpu": "500m"}, "2026-12-07T10:00:00Z", "2026-12-07T11:00:00Z"),
    ]
    use = resource_use(pods, now=NOW)
    assert (use.gpu_hours, use.cpu_core_hours) == (1.5, 2 * 1.5 + 0.5)
    assert (use.pods, use.estimate) == (2, False)
    assert (use.started, use.finished) == ("2026-12-07T10:00:00Z", "2026-12-07T11:30:00Z")


def test_a_running_pod_counts_until_now_as_an_estimate() -> None:
    use = resource_use([_pod({"cpu": "1"}, "2026-12-07T11:00:00Z", None)], now=NOW)
    assert (use.cpu_core_hours, use.estimate, use.finished) == (1.0, True, "")


def test_limits_stand_for_missing_requests_and_sidecars_count() -> None:
    sidecar = {"name": "log", "restartPolicy": "Always", "resources": {"limits": {"cpu": "1"}}}
    init = {"name": "fetch", "resources": {"requests": {"cpu": "8"}}}
    pod = _pod({"cpu": "1"}, "2026-12-07T10:00:00Z", "2026-12-07T11:00:00Z")
    pod["spec"]["initContainers"] = [init, sidecar]
    assert resource_use([pod], now=NOW).cpu_core_hours == 2.0


def test_what_cannot_be_read_is_left_out_and_says_so() -> None:
    pods = [
        _pod({"cpu": "1"}, None, None),  # never started
        _pod({"cpu": "lots"}, "2026-12-07T10:00:00Z", "2026-12-07T11:00:00Z"),
        _pod({"cpu": "1e300"}, "2026-12-07T10:00:00Z", "2026-12-07T11:00:00Z"),
        _pod({"cpu": "1"}, "yesterday", "2026-12-07T11:00:00Z"),
        {"spec": "nonsense", "status": {"startTime": "2026-12-07T10:00:00Z"}},
    ]
    use = resource_use(pods, now=NOW)
    assert use.estimate
    assert (use.cpu_core_hours, use.gpu_hours) == (0.0, 0.0)
