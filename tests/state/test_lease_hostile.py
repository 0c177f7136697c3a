"""A Lease someone else wrote (anyone with edit rights on the namespace can): its holder's
name is repeated in the error, the log and the sinks' line bounded and on one line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mxgitops.errors import LeaseHeldError
from mxgitops.kube import lease
from tests.helpers.lease import FakeLeases

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize("holder", ["h" * 1_000_000, "cron\n\x1b[31mError: forged\u202e"])
def test_a_hostile_holder_is_said_bounded_on_one_line(holder: str) -> None:
    api = FakeLeases()
    api.put(holder, NOW - timedelta(seconds=30))
    with pytest.raises(LeaseHeldError) as caught:
        lease.take(api, instance="t1", namespace="ml", holder="me/1", now=NOW)
    said = str(caught.value)
    assert len(said) < 400 and said.isprintable(), said[:200]
    assert api.writes == []
