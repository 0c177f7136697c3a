"""The metrics, Events and the sinks together, against a hostile Pushgateway and an
operator's slip (issue 37): a push answered a byte a second, credentials in a URL, a
status-token Secret that is missing, Events of held jobs in a namespace the policy
forbids."""

from __future__ import annotations

import base64
import time

import pytest

from mxgitops import metrics
from mxgitops.errors import ConfigError, OutputError
from mxgitops.forge.post import settings_for
from tests import forgeservers

PUSH = metrics.SyncMetrics("t1", 1.0, 2.0, 0)


def test_the_push_timeout_bounds_a_pushgateway_that_drips_its_answer() -> None:
    with forgeservers.dripping() as url:
        started = time.monotonic()
        with pytest.raises(OutputError, match=r"no answer within 2 s"):
            metrics.push(url, PUSH, timeout=2.0)
        assert time.monotonic() - started < 2.0 + 1.5


def test_credentials_in_the_pushgateway_url_are_basic_auth_and_never_printed() -> None:
    with forgeservers.recording() as gateway:
        url = gateway.url.replace("://", "://pusher:pa55word@")
        metrics.push(url, PUSH)
        [(method, path, headers)] = gateway.requests
        assert (method, path) == ("POST", "/metrics/job/mxgitops/instance/t1")
        assert headers["Authorization"] == "Basic " + base64.b64encode(b"pusher:pa55word").decode()
    with forgeservers.recording(status=500) as gateway:
        url = gateway.url.replace("://", "://pusher:pa55word@")
        with pytest.raises(OutputError) as failed:
            metrics.push(url, PUSH)
    assert "pa55word" not in str(failed.value) and "pusher:***@" in str(failed.value)


def test_credentials_in_the_status_api_url_are_refused_unprinted() -> None:
    with pytest.raises(ConfigError, match="status-api-url") as refused:
        settings_for(
            provider="github",
            api_url="https://bot:s3cret@github.example/api/v3",
            repository="org/jobs",
            repo="x",
            token="t",
            url_template="",
            timeout=10,
        )
    assert "s3cret" not in str(refused.value)
