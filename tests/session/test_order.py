"""The session's order: first_in_session tests first, last_in_session last."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.session.order import FIRST, LAST, session_order


@dataclass
class Item:
    name: str
    markers: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> str | None:
        return name if name in self.markers else None


def test_first_and_last_move_and_the_rest_keep_their_order() -> None:
    items = [
        Item("a"),
        Item("runs", {LAST}),
        Item("b"),
        Item("installed", {FIRST}),
        Item("c"),
        Item("late", {LAST}),
    ]
    assert [i.name for i in session_order(items)] == ["installed", "a", "b", "c", "runs", "late"]


def test_a_session_without_marked_tests_keeps_its_order() -> None:
    items = [Item(name) for name in "cab"]
    assert session_order(items) == items


def test_the_markers_are_registered(pytestconfig: pytest.Config) -> None:
    registered = "\n".join(pytestconfig.getini("markers"))
    assert f"{FIRST}:" in registered and f"{LAST}:" in registered
