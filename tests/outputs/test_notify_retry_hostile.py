"""A destination that refuses every delivery (a chat down for hours, a revoked webhook)
is tried again at later and later syncs, not at every one: with a push starting a sync
every minute it would otherwise be spent in five minutes. The back-off is kept in the
book, so a restarted sync keeps it."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from mxgitops.outputs.notify import outbox, transitions
from mxgitops.outputs.notify.settings import Destination, Notifications
from mxgitops.outputs.notify.transitions import Book, decide, delivered
from mxgitops.outputs.summary import JobSummary, Summary

T0 = datetime(2026, 12, 7, 4, 0, tzinfo=UTC)
TARGET = Destination("team", "slack", events=("failed",))
FAILING = Summary(
    jobs=(
        JobSummary("ml", "train", state="Failed", action="unchanged", reason="", runtime_id="r1"),
    )
)


def test_a_refused_delivery_is_tried_again_later_and_later() -> None:
    book = Book()
    tried_at: list[timedelta] = []
    minute = T0
    while minute < T0 + timedelta(days=1):  # a sync every minute, for a day
        queued, after = decide(FAILING, [], Notifications((TARGET,)), book, minute)
        if queued:
            tried_at.append(minute - T0)
            book = delivered(after, "team", queued["team"], ok=False, now=minute)
            book = outbox.decode(outbox.encode(book))  # kept across syncs, as the sink does
        else:
            book = after
        minute += timedelta(minutes=1)
    assert len(tried_at) == transitions.MAX_TRIES
    gaps = [b - a for a, b in itertools.pairwise(tried_at)]
    assert gaps == sorted(gaps) and gaps[0] >= transitions.RETRY_AFTER, tried_at
    assert gaps[-1] >= 4 * transitions.RETRY_AFTER


def test_a_delivery_that_goes_through_is_not_held_back() -> None:
    queued, after = decide(FAILING, [], Notifications((TARGET,)), Book(), T0)
    book = delivered(after, "team", queued["team"], ok=True, now=T0)
    queued, _ = decide(FAILING, [], Notifications((TARGET,)), book, T0 + timedelta(hours=1))
    assert queued == {}
