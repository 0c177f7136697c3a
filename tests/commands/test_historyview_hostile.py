"""`history`'s three outputs of a run whose author and spec change are hostile (git
bounds neither, and keeps bidi overrides, escapes and line separators in a name):
in the table, the Markdown and the JSON alike, nothing hides, no line is added, and
each is bounded."""

from __future__ import annotations

import json

import pytest

from mxgitops.commands.history import Run
from mxgitops.commands.historyview import render_json, render_markdown, render_table, shown

EVIL = "Mallory\u202e\x1b[31m\u2028#injected\u200b\r"


def view() -> object:
    run = Run(
        commit="a" * 40,
        author=EVIL * 20,
        date="2026-12-07T05:20:00+00:00",
        spec_change=(f"args: {EVIL} → x",),
        state=f"Failed{EVIL}",
    )
    return shown("ml/train", [run], None)


@pytest.mark.parametrize("render", [render_table, render_markdown, render_json])
def test_a_hostile_author_hides_nothing_and_adds_no_line(render: object) -> None:
    text = render(view())  # type: ignore[operator]
    for hidden in ("\u202e", "\x1b", "\u2028", "\u200b", "\r"):
        assert hidden not in text, (render, hidden)
    if render is render_json:
        (run,) = json.loads(text)["runs"]
        assert len(run["author"]) <= 300
        assert run["author"].startswith("Mallory\\u202e")
