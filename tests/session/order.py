"""The session's order: a test marked ``first_in_session`` runs before every other,
one marked ``last_in_session`` after every other; the rest keep pytest's order.

Why: an installation whose effects take wall time (the CronJob's scheduled runs,
five minutes apart: ``tests/node/test_cronjob.py``) is made by the first test and
checked by the last, so that the rest of the suite covers the wait instead of CI
idling through it. ``tests/conftest.py`` applies it after every other plugin has
deselected what it deselects. Under xdist each worker is a session: the order holds
on the worker that runs them, which ``tests/session/workergroups.py`` makes one (the node's
group, handed out first since it holds the first test).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

FIRST = "first_in_session"
LAST = "last_in_session"
MARKERS = {
    FIRST: "runs before every other test: an installation checked by a last_in_session test",
    LAST: "runs after every other test: checks what wall time did to a first_in_session one",
}


class Marked(Protocol):
    def get_closest_marker(self, name: str) -> Any: ...


ItemT = TypeVar("ItemT", bound=Marked)


def session_order(items: list[ItemT]) -> list[ItemT]:
    """``items`` with the first ones first and the last ones last, each group in the
    order it came (a stable sort)."""

    def rank(item: ItemT) -> int:
        if item.get_closest_marker(FIRST) is not None:
            return 0
        return 2 if item.get_closest_marker(LAST) is not None else 1

    return sorted(items, key=rank)
