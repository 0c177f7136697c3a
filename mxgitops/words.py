"""Words in messages: a count with its noun in the right number ("1 problem", "2 problems"),
and a length of time at a glance ("2h05m")."""

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


def duration(seconds: float) -> str:
    """`45s`, `14m`, `2h05m`, `3d04h`: a run's length at a glance."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
