"""The pure parts of tests/helpers/cronjobruns.py: a schedule's due times, and a run's requests
read from an audit log by the pod its token is bound to."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cronjobruns import POD_NAME, first_due, period_of, requests_of

ACCOUNT = "system:serviceaccount:mxgitops-example:mxgitops-example"


def test_the_period_of_an_every_n_minutes_schedule() -> None:
    assert period_of("*/5 * * * *") == timedelta(minutes=5)
    for schedule in ("0 * * * *", "*/7 * * * *", "*/5 * * * 1"):
        with pytest.raises(ValueError, match="knows the due times of"):
            period_of(schedule)


def test_the_first_due_time_is_strictly_after_the_creation() -> None:
    five = timedelta(minutes=5)
    at = datetime(2026, 12, 1, 23, 4, 59, tzinfo=UTC)
    assert first_due(at, five) == datetime(2026, 12, 1, 23, 5, tzinfo=UTC)
    on_time = datetime(2026, 12, 1, 23, 5, tzinfo=UTC)  # the controller skips this one
    assert first_due(on_time, five) == datetime(2026, 12, 1, 23, 10, tzinfo=UTC)


def event(user: str, pod: str | None, uri: str, code: int, stage: str = "ResponseComplete") -> str:
    extra = {POD_NAME: [pod]} if pod else {}
    body: dict[str, Any] = {
        "stage": stage,
        "verb": "list",
        "requestURI": uri,
        "user": {"username": user, "extra": extra},
        "responseStatus": {"code": code},
    }
    return json.dumps(body) + "\n"


def test_a_runs_requests_are_those_of_its_pod_since_the_offset(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    before = event(ACCOUNT, "run-1", "/api/v1/pods?limit=500", 200)
    log.write_text(before)
    offset = log.stat().st_size
    log.write_text(
        before
        + event(ACCOUNT, "run-1", "/api/v1/services", 200)
        + event(ACCOUNT, "run-1", "/api/v1/services", 200, stage="ResponseStarted")
        + event(ACCOUNT, "run-2", "/apis/batch/v1/jobs?limit=500", 200)
        + event("mxgitops-admin", None, "/apis/batch/v1/jobs", 200)
        + event(ACCOUNT, "run-2", "/api/v1/pods", 200).rstrip("\n")  # still being written
    )
    assert requests_of(log, offset, ACCOUNT, "run-2") == [
        {"verb": "list", "path": "/apis/batch/v1/jobs", "status": 200, "user": ACCOUNT}
    ]
    assert [e["path"] for e in requests_of(log, offset, ACCOUNT, "run-1")] == ["/api/v1/services"]


def test_a_request_of_the_account_without_a_pod_cannot_be_attributed(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(
        event(ACCOUNT, "run-1", "/api/v1/pods", 200) + event(ACCOUNT, None, "/api/v1/pods", 200)
    )
    with pytest.raises(AssertionError, match="names no pod"):
        requests_of(log, 0, ACCOUNT, "run-1")


def test_a_pod_with_no_request_is_an_error(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(event(ACCOUNT, "run-1", "/api/v1/pods", 200))
    with pytest.raises(AssertionError, match="no request of the run's pod run-9"):
        requests_of(log, 0, ACCOUNT, "run-9")
