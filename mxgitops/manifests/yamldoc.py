"""YAML text -> plain documents that remember the line of every field.

Manifests come from anyone who can open a pull request, so parsing is bounded:
the data is built from the parser's event stream (libyaml's C parser when
PyYAML has it) by an explicit stack rather than by recursion, so deep nesting
and alias bombs end in a one-line error instead of a crash. Aliases are
allowed, but a document may expand to at most `max_values` values and nest at
most `max_depth` levels. Duplicate keys are reported (Kubernetes rejects them
too). Timestamps stay text, as Kubernetes reads them.

`Document.line_of(path)` answers the line of the deepest existing prefix of a
field path, which is where an error about that field should point.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

import yaml

from mxgitops.errors import ManifestError

MAX_VALUES = 100_000
MAX_DEPTH = 64

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
# First characters of plain scalars that the resolver may read as something else than text.
_RESOLVED_FIRST = frozenset(_Loader.yaml_implicit_resolvers)
_ANY_FIRST = None in _RESOLVED_FIRST
_AS_TEXT = frozenset({_STR, "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"})

FieldPath = tuple[str | int, ...]
_RESOLVER: Any = yaml.resolver.Resolver()  # what _Loader resolves with (untyped)
_SHORT = 64  # the tag of a plain scalar up to this length is remembered


def _resolve(value: str) -> str:
    tag: str = _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))
    return tag


_remembered = lru_cache(maxsize=4096)(_resolve)


def _plain_tag(value: str) -> str:
    """The tag of a plain scalar: text, or the number, bool or null YAML 1.1 reads."""
    # The same keys and words recur in every manifest (`name`, `template`, `1`, `true`):
    # the resolver's regular expressions run once per short text, not each time it is
    # written. Long texts are not kept, so the cache stays small whatever is read.
    return _remembered(value) if len(value) <= _SHORT else _resolve(value)


class Issue(NamedTuple):
    """Something wrong with a field: `at` says where to point if not at the field itself
    (a deeper path, such as an unknown key, or a line)."""

    path: FieldPath
    message: str
    at: FieldPath | int | None = None


class YamlError(ManifestError):
    """The text is not YAML we accept; nothing after `line` was read."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass
class Document:
    index: int  # position in the file, from 0
    line: int  # 1-based line of the document's first node
    data: Any
    problems: list[Issue] = field(default_factory=list)
    _lines: dict[int, dict[Any, int]] = field(default_factory=dict, repr=False)

    def line_of(self, path: FieldPath) -> int:
        """The line of the deepest prefix of `path` that exists in the document."""
        line, node = self.line, self.data
        for part in path:
            lines = self._lines.get(id(node))
            if lines is None or part not in lines:
                break
            line, node = lines[part], node[part]
        return line

    def line_for(self, issue: Issue) -> int:
        if isinstance(issue.at, int):
            return issue.at
        return self.line_of(issue.path if issue.at is None else issue.at)


def documents(
    text: str, *, max_values: int = MAX_VALUES, max_depth: int = MAX_DEPTH
) -> Iterator[Document]:
    """Every document of a YAML stream, in order; raise YamlError where it goes wrong."""
    loader: Any = _Loader(text)  # PyYAML's parser methods are untyped
    try:
        index = 0
        while True:
            event = loader.get_event()
            if event is None or isinstance(event, yaml.StreamEndEvent):
                return
            if isinstance(event, yaml.DocumentStartEvent):
                yield _Builder(loader, index, max_values, max_depth).build()
                index += 1
    except yaml.MarkedYAMLError as error:
        line, message = _explained(text, error)
        raise YamlError(line, f"invalid YAML: {message}") from error
    except yaml.YAMLError as error:
        raise YamlError(0, f"invalid YAML: {error}") from error
    finally:
        loader.dispose()


# Events are told apart by exact type (PyYAML subclasses none of these), which costs less
# than isinstance on each of the million events of a large repository.
_SCALAR = yaml.ScalarEvent
_MAPPING_START, _MAPPING_END = yaml.MappingStartEvent, yaml.MappingEndEvent
_SEQUENCE_START, _SEQUENCE_END = yaml.SequenceStartEvent, yaml.SequenceEndEvent
_NO_KEY = object()  # the next value of a mapping is a key
_SKIP = object()  # the key was unusable: drop its value
_MERGE_KEY = object()  # the key was <<


@dataclass(slots=True)
class _Frame:
    container: dict[Any, Any] | list[Any]
    lines: dict[Any, int]
    anchor: str | None
    first_value: int  # the value count when it opened, to size it for aliases
    key: Any = _NO_KEY
    key_line: int = 0
    merges: list[tuple[Any, int]] = field(default_factory=list)


class _Builder:
    """Builds one document from events with an explicit stack (no recursion)."""

    def __init__(self, loader: Any, index: int, max_values: int, depth: int) -> None:
        self.loader = loader
        self.doc = Document(index=index, line=0, data=None)
        self.max_values = max_values
        self.max_depth = depth
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.values = 0

    def build(self) -> Document:
        get_event, stack = self.loader.get_event, self.stack
        while True:
            event = get_event()
            kind = type(event)
            if kind is _SCALAR:
                self.values += 1
                line = event.start_mark.line + 1
                if self.values > self.max_values:
                    self._count(0, line)  # raises
                if not (stack and self._plain_text(event, stack[-1], line)):
                    value, merge = self._scalar(event)
                    self._add(value, line, event.anchor, 1, merge_key=merge, text=event.value)
            elif kind is _MAPPING_START or kind is _SEQUENCE_START:
                self._start(event, {} if kind is _MAPPING_START else [])
            elif kind is _MAPPING_END or kind is _SEQUENCE_END:
                self._end()
            elif kind is yaml.AliasEvent:
                self._alias(str(event.anchor), event.start_mark.line + 1)
            elif kind is yaml.DocumentEndEvent:
                return self.doc

    def _start(self, event: Any, container: dict[Any, Any] | list[Any]) -> None:
        line = event.start_mark.line + 1
        self._count(1, line)
        if len(self.stack) >= self.max_depth:
            raise YamlError(line, f"nested more than {self.max_depth} levels deep")
        self._open(container, line)
        self.stack.append(_Frame(container, {}, event.anchor, self.values))

    def _end(self) -> None:
        frame = self.stack.pop()
        if frame.merges:
            self._merge(frame)
        self.doc._lines[id(frame.container)] = frame.lines
        size = self.values - frame.first_value + 1
        self._add(frame.container, 0, frame.anchor, size)

    def _plain_text(self, event: Any, top: _Frame, line: int) -> bool:
        """The common case, made fast: text without tag or anchor, not a duplicate key."""
        value = event.value
        if event.anchor is not None or event.tag is not None:
            return False
        if (
            event.implicit[0]
            and (_ANY_FIRST or not value or value[0] in _RESOLVED_FIRST)
            and _plain_tag(value) not in _AS_TEXT
        ):
            return False  # a plain scalar that is a number, bool, null...
        container = top.container
        if type(container) is list:
            top.lines[len(container)] = line
            container.append(value)
        elif top.key is _NO_KEY:
            top.key, top.key_line = value, line
        elif top.key is _SKIP or top.key is _MERGE_KEY or top.key in container:
            return False
        else:
            container[top.key] = value
            top.lines[top.key] = top.key_line
            top.key = _NO_KEY
        return True

    def _count(self, values: int, line: int) -> None:
        self.values += values
        if self.values > self.max_values:
            raise YamlError(
                line,
                f"document expands to more than {self.max_values} values "
                "(through YAML aliases?); refusing to read it",
            )

    def _alias(self, anchor: str, line: int) -> None:
        if anchor not in self.anchors:
            if any(frame.anchor == anchor for frame in self.stack):
                raise YamlError(line, f"alias *{anchor} refers to a value that contains it")
            raise YamlError(line, f"alias *{anchor} refers to no anchor &{anchor}")
        value, size = self.anchors[anchor]
        self._count(size, line)
        self._open(value, line)
        self._add(value, line, None, size)

    def _scalar(self, event: Any) -> tuple[Any, bool]:
        tag = event.tag
        if tag is None and event.implicit[0]:
            tag = _plain_tag(event.value)
        elif tag is None or tag == "!":
            tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
        if tag in _AS_TEXT:
            return event.value, False
        if tag == _MERGE:
            return event.value, True
        constructor = self.loader.yaml_constructors.get(tag)
        if constructor is None:
            raise YamlError(event.start_mark.line + 1, f"unknown YAML tag {tag}")
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            return constructor(self.loader, node), False
        except (ValueError, TypeError, ArithmeticError, yaml.YAMLError) as error:
            kind = tag.removeprefix("tag:yaml.org,2002:")
            message = f"{event.value!r} is not a valid !!{kind}"
            raise YamlError(event.start_mark.line + 1, message) from error

    def _open(self, value: Any, line: int) -> None:
        """Remember where a value starts when it is a mapping key's value or a list item."""
        if not self.stack:
            self.doc.line = line
            return
        top = self.stack[-1]
        if isinstance(top.container, list):
            top.lines[len(top.container)] = line

    def _add(
        self,
        value: Any,
        line: int,
        anchor: str | None,
        size: int,
        *,
        merge_key: bool = False,
        text: str = "",
    ) -> None:
        if anchor is not None:
            self.anchors[anchor] = (value, size)
        if not self.stack:
            self.doc.data = value
            self.doc.line = self.doc.line or line
            return
        top = self.stack[-1]
        if isinstance(top.container, list):
            if line:  # scalars; collections were placed when they opened
                top.lines[len(top.container)] = line
            top.container.append(value)
        elif top.key is _NO_KEY:
            top.key, top.key_line = self._key(value, text, merge_key, line), line
        else:
            self._put(top, value)

    def _key(self, value: Any, text: str, merge_key: bool, line: int) -> Any:
        if merge_key:
            return _MERGE_KEY
        if isinstance(value, str):
            return value
        if isinstance(value, dict | list):
            path = self._path()
            message = "a mapping key must be text, not a mapping or list"
            self.doc.problems.append(Issue(path, message, line or None))
            return _SKIP
        return text  # 1, true, null as keys: Kubernetes reads them as text

    def _put(self, top: _Frame, value: Any) -> None:
        key, top.key = top.key, _NO_KEY
        assert isinstance(top.container, dict)
        if key is _SKIP:
            return
        if key is _MERGE_KEY:
            top.merges.append((value, top.key_line))
            return
        if key in top.container:
            message = f"duplicate key (also on line {top.lines[key]})"
            self.doc.problems.append(Issue((*self._path(), key), message, top.key_line))
        top.container[key] = value
        top.lines.setdefault(key, top.key_line)

    def _merge(self, frame: _Frame) -> None:
        """YAML merge keys (`<<: *defaults`): keys written out win over merged ones."""
        assert isinstance(frame.container, dict)
        for value, line in frame.merges:
            sources = value if isinstance(value, list) else [value]
            for source in sources:
                if not isinstance(source, dict):
                    self.doc.problems.append(Issue(self._path(), "<< must merge a mapping", line))
                    continue
                for key, item in source.items():
                    if key not in frame.container:
                        frame.container[key] = item
                        frame.lines[key] = line

    def _path(self) -> FieldPath:
        """The field path of the innermost open container."""
        path: list[str | int] = []
        for parent in self.stack[:-1]:
            if isinstance(parent.container, list):
                path.append(len(parent.container))
            elif isinstance(parent.key, str):
                path.append(parent.key)
        return tuple(path)


_CLOSING = {"[": "]", "{": "}"}


def _explained(text: str, error: yaml.MarkedYAMLError) -> tuple[int, str]:
    """The line of a YAML error and what it says, where the fix goes: at a tab, the
    tab's column and that YAML indents with spaces; at the end of the file inside a
    flow collection, the bracket left open (the parser's mark is past the last line);
    anything else, the parser's words and the column."""
    mark = error.problem_mark or error.context_mark
    if mark is None:
        return 0, error.problem or str(error)
    if text[mark.index : mark.index + 1] == "\t":
        where = f"a tab at column {mark.column + 1}"
        return mark.line + 1, f"{where}: YAML indents with spaces only; replace the tab with spaces"
    opened = _unclosed(text) if not text[mark.index :].strip() else None
    if opened is not None:
        line, column, bracket = opened
        return line, (
            f"unclosed {bracket!r} at column {column}: the file ends before its "
            f"{_CLOSING[bracket]!r}"
        )
    context = f" ({error.context})" if error.context else ""
    last_line = text.count("\n") + (0 if text.endswith("\n") else 1)
    line = min(mark.line + 1, max(last_line, 1))
    return line, f"{error.problem or 'invalid YAML'}{context} at column {mark.column + 1}"


def _unclosed(text: str) -> tuple[int, int, str] | None:
    """The innermost `[` or `{` not closed by the end of `text` (line and column from 1),
    skipping quoted text and comments; None if every one is closed."""
    stack: list[tuple[int, int, str]] = []
    line, column, quote, comment = 1, 0, "", False
    previous = "\n"
    for char in text:
        column += 1
        if char == "\n":
            line, column, comment = line + 1, 0, False
        elif comment:
            pass
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and previous in " \t\n":
            comment = True
        elif char in _CLOSING:
            stack.append((line, column, char))
        elif char in "]}" and stack:
            stack.pop()
        previous = char
    return stack[-1] if stack else None
