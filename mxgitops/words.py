"""Words in messages: a count with its noun in the right number ("1 problem", "2 problems"),
and a did-you-mean for a misspelled word."""

from __future__ import annotations

from collections.abc import Iterable


def counted(number: int, noun: str, plural: str = "") -> str:
    """`number` and `noun`, plural unless it is one (`plural` for an irregular one)."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def did_you_mean(word: object, known: Iterable[str]) -> str:
    """ "; did you mean 'cancel'?" for a word close to one of `known`, else ""."""
    from difflib import get_close_matches  # only a misspelled file needs it

    close = get_close_matches(str(word), list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
