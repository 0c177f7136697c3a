"""The notifications sink: each destination told of this sync's transitions in one
message, within a deadline, the book kept after.

A sink like the statuses and the Events (`outputs/sinks.py`): fed the sync's summary,
never failing what was applied. The transitions to tell are decided first
(`transitions.decide`, pure), then sent destination by destination, each through one
POST bounded by the file's `timeout` and all of them by three times that: chats that
hang cost the sync at most that, and what was not sent is sent at the next sync. The book is
written last, whatever was delivered.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from mxgitops.errors import OutputError
from mxgitops.outputs.leased import Leased
from mxgitops.outputs.notify import chat, outbox, transitions, webhook
from mxgitops.outputs.notify.notice import Notice
from mxgitops.outputs.notify.settings import Destination, Notifications
from mxgitops.outputs.summary import Summary
from mxgitops.planning.ledger import JobKey

if TYPE_CHECKING:
    from mxgitops.outputs.sinks import Record

TOTAL_TIMEOUTS = 3  # all destinations together: three times one's timeout
log = logging.getLogger("mxgitops")
PAYLOADS: dict[str, Callable[[Sequence[Notice]], dict[str, object]]] = {
    "slack": chat.slack,
    "mattermost": chat.mattermost,
    "discord": chat.discord,
    "msteams": chat.msteams,
    "googlechat": chat.googlechat,
}


def request(
    destination: Destination, notices: Sequence[Notice], instance: str
) -> tuple[bytes, dict[str, str]]:
    """The body and headers `destination` is sent for `notices`."""
    if destination.provider in PAYLOADS:
        return webhook.encode(PAYLOADS[destination.provider](notices)), {}
    body = webhook.encode(webhook.generic_body(notices, instance))
    if destination.provider == "generic-hmac":
        return body, {"X-Signature": webhook.signature(body, destination.secret)}
    return body, {}


@dataclass(frozen=True)
class Notify:
    notifications: Notifications
    instance: str
    namespace: str  # the instance's home: where the book is kept
    repo: str = field(default="", repr=False)  # for the commits' links; may hold a token
    clock: Callable[[], float] = time.monotonic
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    phase: str = "notify"

    def deliver(self, record: Record) -> None:
        """Tell each destination what it wants of `record`; an
        OutputError naming the destinations that were not told."""
        if record.summary is None or record.cluster is None or record.leased is None:
            return  # a sync stopped before its summary: the metrics say it
        self.tell(record.summary, record.finished, record.cluster, record.leased)

    def tell(
        self,
        summary: Summary,
        finished: Sequence[JobKey],
        api: outbox.BookAPI,
        leased: Leased = lambda _: nullcontext(),
    ) -> None:
        """Tell the destinations (HTTP, outside the Lease), then write the book under
        `leased`."""
        kept = outbox.read(api, instance=self.instance, namespace=self.namespace)
        now = self.now()
        queued, book = transitions.decide(
            summary, finished, self.notifications, kept.book, now, self.repo
        )
        before = book
        failures: list[str] = []
        timeout = self.notifications.timeout.total_seconds()
        total = timeout * TOTAL_TIMEOUTS
        deadline = self.clock() + total
        for destination in self.notifications.destinations:
            notices = queued.get(destination.name)
            if not notices:
                continue
            what = f"notifications to {destination.name} ({destination.provider})"
            left = deadline - self.clock()
            if left <= 0:
                failures.append(f"{what}: not sent, {total:g} s passed; next sync")
                continue
            body, headers = request(destination, notices, self.instance)
            try:
                webhook.post(
                    destination.address,
                    body,
                    headers=headers,
                    timeout=min(timeout, left),
                    what=what,
                )
            except OutputError as exc:
                failures.append(str(exc))
                book = transitions.delivered(book, destination.name, notices, False, now)
            else:
                book = transitions.delivered(book, destination.name, notices, True, now)
                log.info("%s: %d told", what, len(notices))
        for slot in transitions.given_up(before, book):
            log.error(
                "notifications: %s: not delivered in %d tries, given up",
                slot,
                transitions.MAX_TRIES,
            )
        outbox.write(
            api, kept, book, instance=self.instance, namespace=self.namespace, leased=leased
        )
        if failures:
            raise OutputError(
                "; ".join(failures[:3])
                + (f"; and {len(failures) - 3} more" if len(failures) > 3 else "")
            )
