"""The body of a Kubernetes LIST, decoded as it is read, one item at a time.

A page of thousands of Jobs or pods is tens of megabytes of JSON; decoded whole
it is held twice (the text and its objects, untrimmed). Here it is not held at
all. What this module promises:

- `decode_list(read, keep)` asks `read` for the next chunk of the body only when
  it needs one, and hands each element of `items` to `keep` as soon as it is
  decoded, before the next one is: no more of the text is held than the item
  being decoded and a chunk, and what `keep` drops of an item is never held
  beside the next;
- any chunking reads as the one text (a character, a number or a string cut
  between chunks); the list's other members (kind, apiVersion, metadata with
  `continue`) are returned, whichever order they come in;
- anything that is not one JSON object raises `ValueError`;
- an item longer than many chunks costs time linear in its length;
- what a server gone wrong sends is bounded: a value (an item, or another member)
  longer than `MAX_VALUE` characters, or nested deeper than `MAX_DEPTH` levels,
  raises `ValueError` (never RecursionError, never memory without end);
- `interned(item)` makes the keys and short strings of a decoded item shared
  with every other item's, as one `json.loads` of a whole page shared its keys.

It is pure: no I/O but calling `read`, no state beyond one call. Items are
decoded by the standard library's C decoder (`json.JSONDecoder.raw_decode`).
"""

from __future__ import annotations

import codecs
import json
import re
import sys
from collections.abc import Callable
from typing import Any

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_intern = sys.intern
_SHORT = 64  # characters of a string `interned` shares: label values, kinds, phases
# An object is at most 1.5 MiB in etcd; its JSON, escaped, a few times that at most.
MAX_VALUE = 16 * 1024 * 1024
# A pod or batch Job is some 15 levels deep; the API server's own decoder stops at 10,000,
# Python's C decoder at its recursion limit (a RecursionError).
MAX_DEPTH = 100


class _JsonStream:
    """A JSON text read a chunk at a time, decoded value by value with the standard
    library's C decoder: no more of the text is held than the value being decoded
    and one chunk."""

    def __init__(self, read: Callable[[], bytes]) -> None:
        self._read = read
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._text = ""
        self._at = 0
        self._ended = False

    def _more(self, chunks: int = 1) -> None:
        read: list[bytes] = []
        while len(read) < chunks and not self._ended:
            read.append(self._read())
            self._ended = not read[-1]
        fresh = self._utf8.decode(b"".join(read), final=self._ended)
        self._text, self._at = self._text[self._at :] + fresh, 0

    def peek(self) -> str:
        """The next character that is not white space ("" at the end of the text)."""
        while True:
            self._at = _SPACE.match(self._text, self._at).end()  # type: ignore[union-attr]
            if self._at < len(self._text) or self._ended:
                return self._text[self._at : self._at + 1]
            self._more()

    def take(self, char: str) -> None:
        found = self.peek()
        if found != char:
            raise ValueError(f"expected {char!r}, found {found or 'the end'!r}")
        self._at += 1

    def value(self) -> Any:
        """The next whole value. One cut off at the end of what was read fails to decode
        (or, a number, ends there): read on and decode it again, reading twice as much
        each time, so a value longer than many chunks costs linear time."""
        self.peek()
        chunks = 1
        while True:
            try:
                value, end = _DECODER.raw_decode(self._text, self._at)
            except RecursionError:
                raise ValueError(f"an item nested deeper than {MAX_DEPTH} levels") from None
            except json.JSONDecodeError:
                if self._ended:
                    raise
            else:
                if end < len(self._text) or self._ended or isinstance(value, dict | list | str):
                    self._at = end
                    return value
            if len(self._text) - self._at > MAX_VALUE:
                raise ValueError(f"an item longer than {MAX_VALUE} characters")
            self._more(chunks)
            chunks *= 2

    def end(self) -> None:
        """Read to the end: nothing but white space may follow (and the connection is
        then free for the next request)."""
        if self.peek():
            raise ValueError(f"unexpected {self._text[self._at : self._at + 20]!r} at the end")


def decode_list(read: Callable[[], bytes], keep: Callable[[Any], None]) -> dict[str, Any]:
    """A list's JSON object, read by `read` a chunk at a time: each element of its
    `items` goes to `keep` as soon as it is decoded; returned are its other members
    (kind, apiVersion, metadata with `continue`), whichever order they come in."""
    stream, rest = _JsonStream(read), {}

    def elements(close: str, one: Callable[[], None]) -> None:
        if stream.peek() != close:
            one()
            while stream.peek() == ",":
                stream.take(",")
                one()
        stream.take(close)

    def member() -> None:
        key = stream.value()
        if not isinstance(key, str):
            raise ValueError(f"a key that is not a string: {str(key)[:80]}")
        stream.take(":")
        if key == "items" and stream.peek() == "[":
            stream.take("[")
            elements("]", lambda: keep(stream.value()))
        else:
            rest[key] = stream.value()

    stream.take("{")
    elements("}", member)
    stream.end()
    return rest


def interned(value: Any, depth: int = 0) -> Any:
    """`value` with its keys, and its short strings (label values, kinds, phases),
    interned: one string object for each across all the items of all pages, where
    decoding item by item made one per item (json.loads of a whole page shared its
    keys only), so a large LIST holds each repeated string once (docs/development:
    measurements). A list's strings are kept as they are.
    ValueError for a value nested deeper than `MAX_DEPTH` levels."""
    return _shared_dict(value, depth) if type(value) is dict else _shared_list(value, depth)


# `interned` runs on every listed object: one loop per container, each value's type
# asked once (`type(v) is dict`: what JSON decodes is never a subclass), no call per string.


def _shared_dict(value: dict[str, Any], depth: int) -> dict[str, Any]:
    if depth >= MAX_DEPTH:
        raise ValueError(f"an item nested deeper than {MAX_DEPTH} levels")
    shared: dict[str, Any] = {}
    for key, inner in value.items():
        kind = type(inner)
        if kind is str:
            if len(inner) < _SHORT:
                inner = _intern(inner)
        elif kind is dict:
            inner = _shared_dict(inner, depth + 1)
        elif kind is list:
            inner = _shared_list(inner, depth + 1)
        shared[_intern(key)] = inner
    return shared


def _shared_list(value: list[Any], depth: int) -> list[Any]:
    if depth >= MAX_DEPTH:
        raise ValueError(f"an item nested deeper than {MAX_DEPTH} levels")
    shared: list[Any] = []
    for inner in value:
        kind = type(inner)
        if kind is dict:
            inner = _shared_dict(inner, depth + 1)
        elif kind is list:
            inner = _shared_list(inner, depth + 1)
        shared.append(inner)
    return shared
