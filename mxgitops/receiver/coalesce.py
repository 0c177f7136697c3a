"""When a push starts a sync: at once, after the sync that runs, or not at all. Pure.

A sync that is running may have fetched the repository before a push came, so a push
during a sync needs one more sync after it; but one is enough for any number of
pushes: it fetches the branch's tip then. So at most one sync waits, and a burst of
pushes starts at most two syncs: the one running (or starting now) and the one
waiting. Every run of the CronJob counts as running, scheduled or started by
kubectl or a push: two syncs never overlap here (the Lease would stop the second).

What runs is known from the cluster, in two ways that may race: the Jobs the
receiver is creating (`launching`, known first) and what a LIST or a watch of the
CronJob's Jobs says (`active`). A Job whose create has not come back, or came back
after a LIST began, counts as running until the cluster says otherwise; one that
was created before a LIST began and is not in it is gone.

Pushes seen before (their delivery id or body) start nothing (`webhook.Deliveries`).
"""

from __future__ import annotations

import itertools
from enum import StrEnum

from mxgitops.receiver.webhook import Deliveries, Push


class Decision(StrEnum):
    START = "starting a sync"
    QUEUED = "a sync runs: one more starts when it ends"
    COALESCED = "a sync already waits to start: it covers this push"
    REPLAYED = "a replay of a push seen before: nothing starts"
    # Not the coalescer's: the starter answers so before asking it (`pushsync.py`).
    SUSPENDED = (
        "the CronJob is suspended: nothing starts; its schedule syncs again once it is resumed"
    )


IN_FLIGHT = -1  # `launching`'s mark of a create that has not come back


class Coalescer:
    """One running sync and at most one waiting. Not thread-safe: the caller locks."""

    def __init__(self, deliveries: Deliveries | None = None) -> None:
        self.deliveries = deliveries or Deliveries()
        self.active: set[str] = set()  # the CronJob's unfinished Jobs, as last seen
        self.launching: dict[str, int] = {}  # created by us, not yet seen: name -> tick
        self.waiting: Push | None = None
        self._ticks = itertools.count(1)

    def tick(self) -> int:
        """A point in this coalescer's history, to tell what came before a LIST."""
        return next(self._ticks)

    def running(self) -> bool:
        return bool(self.active or self.launching)

    def push(self, push: Push) -> Decision:
        if not self.deliveries.first_time(push):
            return Decision.REPLAYED
        if self.waiting is not None:
            return Decision.COALESCED
        self.waiting = push
        return Decision.QUEUED if self.running() else Decision.START

    def take(self) -> Push | None:
        """The push to start a sync for now: none while one runs or none waits. The
        caller names its Job and calls `launch` before it lets go of its lock."""
        if self.waiting is None or self.running():
            return None
        push, self.waiting = self.waiting, None
        return push

    def launch(self, name: str) -> None:
        self.launching[name] = IN_FLIGHT

    def launched(self, name: str) -> None:
        """The create came back (made, or made before): running until seen to end."""
        if name in self.launching:
            self.launching[name] = self.tick()

    def existed(self, name: str) -> None:
        """A Job of that name was there before (the same delivery, started before):
        whether it runs is what the cluster says of it."""
        self.launching.pop(name, None)

    def withdrawn(self, name: str) -> None:
        """The Job was not created after all (the CronJob is suspended): nothing runs
        for it, and its push is dropped."""
        self.launching.pop(name, None)

    def failed(self, name: str, push: Push) -> None:
        """The create failed: nothing runs for `push`, which waits again (a newer push
        waiting covers it)."""
        self.launching.pop(name, None)
        if self.waiting is None:
            self.waiting = push

    def observed(self, name: str, *, ended: bool) -> None:
        """A watch event of one of the CronJob's Jobs (deleted: `ended`)."""
        self.launching.pop(name, None)
        if ended:
            self.active.discard(name)
        else:
            self.active.add(name)

    def listed(self, unfinished: set[str], present: set[str], since: int) -> None:
        """A LIST, begun at tick `since`, found these of the CronJob's Jobs."""
        self.active = set(unfinished)
        for name, tick in list(self.launching.items()):
            if name in present or IN_FLIGHT < tick < since:
                del self.launching[name]  # listed (so in `active` if running), or gone
