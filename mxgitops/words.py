"""Words in messages: a count with its noun in the right number ("1 problem", "2 problems")."""

from __future__ import annotations


def counted(number: int, noun: str, plural: str = "") -> str:
    """`number` and `noun`, plural unless it is one (`plural` for an irregular one)."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"
