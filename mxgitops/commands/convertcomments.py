"""Which comments of a manifest a conversion dropped, said to whoever converts it.

`convert` keeps comments wherever ruamel.yaml keeps their node, and carries those of the
spec's fields to where the fields go (`manifests.yamlcomments`). A comment on a field the
target has no place for (a seed replica's default `PsRootPort`, which kubeflow.org/v1
writes nowhere) goes with its field: it is named, so the person who wrote it can put it
back by hand. Comments are compared as texts, line by line: text that looks like a
comment but is not one (a `#` inside a block scalar) is kept by the conversion too, so
it is never named.
"""

from __future__ import annotations

from collections import Counter

_MAX_SAID = 120  # characters of a dropped comment quoted in its line


def comments(text: str) -> list[tuple[int, str]]:
    """Each line's comment (from its `#`, stripped) with its line number, 1-based. A `#`
    starts a comment at the start of a line or after a blank, outside quotes."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        start = _comment_start(line)
        if start is not None:
            found.append((number, line[start:].strip()))
    return found


def dropped(before: str, after: str, *, ignore: frozenset[str] = frozenset()) -> list[str]:
    """The comments of `before` that `after` no longer has, as `LINE: # text` (the text
    cut and its hidden characters escaped: it goes to a terminal), in file order.
    Comments whose text starts with one of `ignore` (said apart) are left out."""
    kept = Counter(text for _, text in comments(after))
    lost = []
    for number, text in comments(before):
        if kept[text] > 0:
            kept[text] -= 1
        elif not text.startswith(tuple(ignore)):
            lost.append(f"{number}: {_shown(text)}")
    return lost


def _comment_start(line: str) -> int | None:
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'" and (index == 0 or line[index - 1] in " \t[{,:-"):
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return index
    return None


def _shown(text: str) -> str:
    shown = "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" for ch in text)
    return shown if len(shown) <= _MAX_SAID else shown[: _MAX_SAID - 1] + "…"
