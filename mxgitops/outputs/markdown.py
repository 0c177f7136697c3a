"""Markdown for pull-request comments, with every string from outside made inert.

File names, field names, messages and job names come from whoever opened the
pull request; errors and notes echo them. Printed raw into a comment, a
newline or a backtick breaks out of its code span and writes headings, links,
mentions or HTML of the author's choosing ("## ✅ Approved by
@org/platform-admins"). So such a string only ever appears here on one line
(control and invisible characters shown as escapes) and, unless it is a plain
word, inside a code span whose fence is longer than any run of backticks in it:
Markdown renders nothing inside one, links and mentions included.
"""

from __future__ import annotations

import re

_BACKTICKS = re.compile(r"`+")
_PLAIN = re.compile(r"[A-Za-z0-9 ,;()-]*")
_BACKSLASHES_BEFORE_PIPE = re.compile(r"(\\*)\|")
_ESCAPES = {"\n": r"\n", "\r": r"\r", "\t": r"\t"}


def visible(value: str) -> str:
    """`value` on one line: control and format characters (newlines, bidi overrides,
    zero-width spaces) written as escapes, so nothing hides and no line is added."""
    return "".join(
        ch if ch == " " or ch.isprintable() else _ESCAPES.get(ch, f"\\u{ord(ch):04x}")
        for ch in value
    )


def code(value: str, *, table: bool = False) -> str:
    """`value` as an inline code span that nothing in it can close; `table` for a
    cell of a table, where a pipe must be escaped even inside a code span."""
    shown = visible(value)
    if table:
        # GFM splits cells before it parses code spans: every pipe gets a backslash,
        # and backslashes before a pipe are doubled so none of them escapes ours.
        shown = _BACKSLASHES_BEFORE_PIPE.sub(lambda m: m.group(1) * 2 + r"\|", shown)
    if not shown:
        return "` `"
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(shown)), default=0) + 1)
    # A span that starts or ends with a backtick, or with spaces at both ends, needs
    # one space of padding on each side, which Markdown strips again.
    padded = shown[0] in "` " or shown[-1] in "` "
    pad = " " if padded else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def text(value: str, *, table: bool = False) -> str:
    """Plain words as they are (they cannot mean anything in Markdown); anything else
    as a code span."""
    return value if _PLAIN.fullmatch(value) else code(value, table=table)
