"""Comments that move with their fields when a YAML spec is rebuilt (ruamel.yaml round trip).

`mxgitops convert` rebuilds a job's spec through the model, so the old spec's
nodes are replaced by new ones and ruamel.yaml would drop their comments. This
module carries them over. What it promises, for block-style mappings and
sequences:

- an old field's comments go to the first new field (in document order) that
  names it as a source (`Comments.carry`), or stay with it when its node is
  moved as it is (a pod template, a scheduling policy); the comments of an old
  field that no new field comes from are dropped with it;
- whole lines above a field stay above it, at the field's new indentation
  (blank lines kept); lines after the spec's last field stay at its end;
- a field's end-of-line comment stays on its line: at the same column while
  the line is as long as it was, otherwise as far after the line as it was;
- a sequence item's end-of-line comment (`- key: x  # note`) stays on its
  first line; an alias is walked once, where its anchor is written;
- only comments move: no value, key or key order is changed. Inside a
  flow-style node (`{a: 1}`, `[1, 2]`) nothing is moved.

Use: `take` the old spec's comments before rebuilding it (this strips them
from its nodes, which the walk keeps alive), `carry` each rebuilt field from
the old fields it comes from, then `give` them to the new spec once it is in
the document. `plain` and `written_key` read nodes the way the walk and
`mxgitops.commands.convert` both need.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken


def plain(node: Any) -> Any:
    """ruamel's round-trip types as plain JSON values (what the schemas and rules read)."""
    if isinstance(node, Mapping):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return str(node)


def written_key(node: Any, key: Any) -> Any:
    """`key` as the mapping `node` spells it (older versions' case too); else `key`."""
    if isinstance(node, Mapping) and key not in node:
        folded = str(key).lower()
        return next((k for k in node if str(k).lower() == folded), key)
    return key


_Place = tuple[int, Any]  # (id of a mapping or sequence, its key or index)
_Holder = tuple[Any, Any, int]  # (mapping or sequence, key or index, comment slot)


@dataclass
class _Notes:
    """The comments of one field: the whole lines above it, the one ending its line."""

    before: list[str] = field(default_factory=list)  # stripped; "" is a blank line
    eol: str | None = None
    offset: int | None = None  # the eol comment's column, from the field's
    width: int | None = None  # the field's line as written, from its column
    gap: int = 2  # spaces between the field's line and its eol comment


class Comments:
    """A spec's comments by field, taken from the old spec and given to the new one.

    ruamel.yaml keeps a comment in the token before it: a field's end-of-line
    comment and the whole lines below it (written above the *next* field) are one
    token. `take` reads the old spec in document order, gives every field its own
    notes and strips the tokens; `give` walks the new spec in document order and
    writes the notes back at each field's new place and indentation.
    """

    def __init__(self) -> None:
        self.notes: dict[_Place, _Notes] = {}
        self.sources: dict[_Place, list[_Place]] = {}
        self.first_eol: dict[_Place, _Notes] = {}  # a sequence item's, for its first key
        self.trailing: list[str] = []  # lines after the spec's last field, as written
        self._alive: dict[int, Any] = {}  # the old nodes, so that no new node takes an id
        self._given: set[int] = set()

    def take(self, doc: CommentedMap, spec: Any) -> None:
        slots = doc.ca.items.get("spec")
        token = slots[2] if slots else None
        pending: list[str] = []
        if token is not None:
            first, _, rest = str(token.value).partition("\n")
            pending = rest.split("\n")[:-1]
            if first.strip():
                token.value = first + "\n"
            else:
                slots[2] = None
        self.trailing = self._take(spec, pending)

    def carry(self, new: Any, key: Any, *sources: tuple[Any, Any]) -> None:
        """The field `new[key]` takes the comments of the old fields `sources`."""
        places = [(id(old), written_key(old, old_key)) for old, old_key in sources if _block(old)]
        self.sources[(id(new), key)] = places

    def give(self, doc: CommentedMap, spec: Any) -> None:
        if _block(spec):
            holder = self._give(spec, 2, (doc, "spec", 2))
            _append(holder, [line.rstrip() for line in self.trailing])

    def _take(self, node: Any, pending: list[str]) -> list[str]:
        if _ruamel(node) and not _block(node) and node.ca.comment is not None:
            node.ca.comment[0] = None  # a flow node's copy of its field's eol token
        if not _block(node) or id(node) in self._alive:
            return pending  # an alias is written (and commented) where its anchor is
        self._alive[id(node)] = node
        if node.ca.comment is not None:
            for token in node.ca.comment[1] or []:
                pending = pending + _lines(token)
            node.ca.comment = None
        is_map = isinstance(node, CommentedMap)
        for key in list(node) if is_map else range(len(node)):
            slots = node.ca.items.pop(key, None) or [None, None, None, None]
            notes = _Notes(before=[line.strip() for line in pending])
            for token in slots[1] or []:
                notes.before += [line.strip() for line in _lines(token)]
            self.notes[(id(node), key)] = notes
            pending = []
            token = slots[2 if is_map else 0]
            if token is not None:
                first, _, rest = str(token.value).partition("\n")
                pending = rest.split("\n")[:-1]
                column = _column(node, key)
                if first.strip():
                    notes.eol = first.strip()
                    if column is not None:
                        end = _line_end(column, key if is_map else None, node[key])
                        notes.offset = token.start_mark.column - column
                        notes.width = end - column
                        notes.gap = max(1, token.start_mark.column - end)
            pending = self._take(node[key], pending)
        return pending

    def _notes(self, container: Any, key: Any) -> _Notes:
        """The notes a new field carries (each old field's are given once)."""
        place = (id(container), key)
        merged = _Notes()
        for source in self.sources.get(place, [place]):
            notes = self.notes.pop(source, None)
            if notes is not None and merged.eol is None and notes.eol is not None:
                merged = replace(notes, before=merged.before + notes.before)
            elif notes is not None:
                merged.before += notes.before
        spare = self.first_eol.pop(place, None)
        if merged.eol is None and spare is not None:
            merged = replace(spare, before=merged.before)
        return merged

    def _give(self, node: Any, column: int, holder: _Holder) -> _Holder:
        """Write the notes of `node`'s fields (keys at `column`); the last holder."""
        if id(node) in self._given:
            return holder
        self._given.add(id(node))
        is_map = isinstance(node, CommentedMap)
        for key in list(node) if is_map else range(len(node)):
            value = node[key]
            if value and isinstance(value, (dict, list)) and not _ruamel(value):
                value = node[key] = _commented(value)  # plain: from the model
            notes = self._notes(node, key)
            if not is_map and isinstance(value, CommentedMap) and _block(value):
                self.first_eol[(id(value), next(iter(value)))] = notes  # "- key: x  # eol"
                notes = _Notes(before=notes.before)
            indent = " " * (column if is_map else column - 2)
            _append(holder, [indent + line if line else "" for line in notes.before])
            if notes.eol is not None:
                end = _line_end(column, key if is_map else None, value)
                at = end + notes.gap  # after the field, as far as it was
                if notes.offset is not None and end - column == notes.width:
                    at = column + notes.offset  # an unchanged line keeps its comment's column
                slots = node.ca.items.setdefault(key, [None, None, None, None])
                slots[2 if is_map else 0] = CommentToken(notes.eol + "\n", CommentMark(at))
            holder = (node, key, 2 if is_map else 0)
            if _block(value):
                nested = 0 if isinstance(value, CommentedMap) else 2  # "- " before each item
                inner = column + nested + (2 if is_map else 0)
                holder = self._give(value, inner, holder)
        return holder


def _block(node: Any) -> bool:
    """A non-empty mapping or sequence written in block style (comments live there)."""
    return _ruamel(node) and len(node) > 0 and node.fa.flow_style() is not True


def _ruamel(node: Any) -> bool:
    return isinstance(node, (CommentedMap, CommentedSeq))


def _commented(value: Any) -> Any:
    """Plain mappings and sequences as ruamel's, which can carry comments."""
    if isinstance(value, Mapping):
        result = CommentedMap()
        for key, item in value.items():
            result[key] = _commented(item)
        return result
    if isinstance(value, list):
        return CommentedSeq(_commented(item) for item in value)
    return value


def _lines(token: Any) -> list[str]:
    """A comment token's lines, the first at the token's column."""
    lines = str(token.value).split("\n")[:-1] or [""]
    if lines[0]:
        lines[0] = " " * token.start_mark.column + lines[0]
    return lines


def _column(node: Any, key: Any) -> int | None:
    """The column a field was written at, if ruamel recorded it."""
    data = getattr(node.lc, "data", None) or {}
    position = data.get(key)
    return int(position[1]) if position else None


def _line_end(column: int, key: Any, value: Any) -> int:
    """Where a field's line ends: `key: value` (mapping) or `value` (sequence item)."""
    end = column if key is None else column + len(str(key)) + 1
    if _block(value):
        return end  # `key:`, the value on the lines below
    text = plain(value)
    text = json.dumps(text) if not isinstance(text, str) else text
    quoted = 2 if type(value).__name__.endswith("QuotedScalarString") else 0
    return end + (1 if key is not None else 0) + len(text) + quoted


def _append(holder: _Holder, lines: list[str]) -> None:
    """Whole comment lines after the holder's line (before what comes next)."""
    if not lines:
        return
    container, key, slot = holder
    slots = container.ca.items.setdefault(key, [None, None, None, None])
    text = "".join(line + "\n" for line in lines)
    if slots[slot] is None:
        slots[slot] = CommentToken("\n" + text, CommentMark(0))
    else:
        slots[slot].value = str(slots[slot].value) + text
