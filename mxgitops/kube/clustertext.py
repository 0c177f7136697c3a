"""Text the cluster says, made safe to repeat: on one line, bounded, nothing hidden.

The statuses mxgitops reads (a pod's termination message, a batch Job's or a JobSet's
condition messages, Kueue's `clusterName` and admission-check messages), the Events
about a pod taken away and a failed container's log are written by controllers, by a
program, or by anyone allowed to patch a status; the API server bounds none of them
(a core/v1 Event's message only by etcd's request size, 1.5 MB). They go into the
plan's rows, the note, the ledger, the Events mxgitops writes and every view of
those. So each such string is read through `said` where it enters: as a LIST brings
an object's status (`listing.py`), the Events read beside it (`kube/reads.py`), and
each line of a log tail (`failurelog.py`). Whitespace (a newline too) becomes a
space, other control and format characters (bidi overrides, zero-width spaces) are
written as escapes (`\\u202e`), and at most `MAX_SAID` characters are kept.
"""

from __future__ import annotations

from typing import Any

MAX_SAID = 1024  # characters kept of one string the cluster says
MAX_DEPTH = 32  # levels of an object read through `said_within`; deeper, dropped
_CUT = "…"


def said(value: str, limit: int = MAX_SAID) -> str:
    """`value` on one line, its hidden characters shown as escapes, at most `limit`
    characters (the end cut off, marked `…`)."""
    if len(value) <= limit and value.isprintable():  # nearly every string: as it is
        return value
    head = value[: limit + 1]  # an escape only lengthens: the rest cannot be kept
    shown = "".join(
        ch if ch.isprintable() else " " if ch.isspace() else f"\\u{ord(ch):04x}" for ch in head
    )
    if len(shown) <= limit and len(head) == len(value):
        return shown
    return shown[: limit - len(_CUT)] + _CUT


def said_within(value: Any, depth: int = 0) -> Any:
    """`value` (what a JSON object holds, changed in place: it is the reader's own) with
    each of its strings `said`; what lies deeper than `MAX_DEPTH` levels is dropped (no
    reader goes there). Most strings are left as they are, without a copy."""
    if isinstance(value, str):
        return said(value)
    if not isinstance(value, dict | list):
        return value
    if depth >= MAX_DEPTH:
        return None
    keys = list(value) if isinstance(value, dict) else range(len(value))
    for key in keys:
        inner = value[key]
        if type(inner) is str:
            if len(inner) > MAX_SAID or not inner.isprintable():
                value[key] = said(inner)
        elif isinstance(inner, dict | list):
            value[key] = said_within(inner, depth + 1)
    return value
