"""Label and field selectors, parsed the way kube-apiserver parses them.

The label-selector grammar, its lexer quirks (``in``/``notin`` are values
inside parentheses, ``x=`` means "equals the empty string") and its error
messages are ported from ``k8s.io/apimachinery/pkg/labels/selector.go`` so a
bad selector fails here exactly when, and with the words that, it fails on a
real cluster.  Field selectors follow ``pkg/fields/selector.go``; only
``metadata.name`` and ``metadata.namespace`` are supported, as for most
built-in resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from . import names
from .errors import ApiError, FieldError, aggregate, bad_request

_SPECIAL = set("=!(),><")
_WHITESPACE = set(" \t\r\n")
_TOKENS = {
    ")": "CLOSE",
    ",": "COMMA",
    "!": "NOT",
    "==": "DOUBLE_EQUALS",
    "=": "EQUALS",
    ">": "GT",
    "in": "IN",
    "<": "LT",
    "!=": "NOT_EQUALS",
    "notin": "NOTIN",
    "(": "OPEN",
}
_OPERATORS = {
    "IN": "in",
    "EQUALS": "=",
    "DOUBLE_EQUALS": "==",
    "GT": "gt",
    "LT": "lt",
    "NOTIN": "notin",
    "NOT_EQUALS": "!=",
}
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # in notin = == != gt lt exists !
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in ("in", "=", "=="):
            return self.key in labels and labels[self.key] in self.values
        if op in ("notin", "!="):
            return self.key not in labels or labels[self.key] not in self.values
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        if self.key not in labels:
            return False
        try:
            have, want = int(labels[self.key]), int(self.values[0])
        except ValueError:
            return False
        return have > want if op == "gt" else have < want


class _Lexer:
    def __init__(self, text: str) -> None:
        self.s = text
        self.pos = 0

    def _read(self) -> str:
        if self.pos < len(self.s):
            ch = self.s[self.pos]
            self.pos += 1
            return ch
        self.pos += 1  # mirrors Go: unread() after end-of-string steps back
        return ""

    def lex(self) -> tuple[str, str]:
        ch = self._read()
        while ch in _WHITESPACE and ch:
            ch = self._read()
        if not ch:
            return "EOS", ""
        self.pos -= 1
        if ch in _SPECIAL:
            return self._special()
        return self._identifier()

    def _identifier(self) -> tuple[str, str]:
        start = self.pos
        while self.pos < len(self.s) and self.s[self.pos] not in _SPECIAL | _WHITESPACE:
            self.pos += 1
        word = self.s[start : self.pos]
        return (_TOKENS[word], word) if word in _TOKENS else ("ID", word)

    def _special(self) -> tuple[str, str]:
        buffer = ""
        last: tuple[str, str] | None = None
        while self.pos < len(self.s) and self.s[self.pos] in _SPECIAL:
            buffer += self.s[self.pos]
            self.pos += 1
            if buffer in _TOKENS:
                last = (_TOKENS[buffer], buffer)
            elif last is not None:
                self.pos -= 1
                break
        if last is None:
            return "ERROR", f"error expected: keyword found '{buffer}'"
        return last


class _Parser:
    def __init__(self, text: str) -> None:
        lexer = _Lexer(text)
        self.items: list[tuple[str, str]] = []
        while True:
            item = lexer.lex()
            self.items.append(item)
            if item[0] == "EOS":
                break
        self.pos = 0

    def _peek(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.items[self.pos]
        return ("ID", lit) if values and tok in ("IN", "NOTIN") else (tok, lit)

    def _next(self, values: bool = True) -> tuple[str, str]:
        item = self._peek(values)
        self.pos += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self._peek()
            if tok in ("ID", "NOT"):
                try:
                    requirements.append(self._requirement())
                except ValueError as err:
                    raise ValueError(f"unable to parse requirement: {err}") from None
                tok, lit = self._next()
                if tok == "EOS":
                    return requirements
                if tok != "COMMA":
                    raise ValueError(f"found '{lit}', expected: ',' or 'end of string'")
                tok2, lit2 = self._peek()
                if tok2 not in ("ID", "NOT"):
                    raise ValueError(f"found '{lit2}', expected: identifier after ','")
            elif tok == "EOS":
                return requirements
            else:
                raise ValueError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def _requirement(self) -> Requirement:
        operator = ""
        tok, lit = self._next()
        if tok == "NOT":
            operator = "!"
            tok, lit = self._next()
        if tok != "ID":
            raise ValueError(f"found '{lit}', expected: identifier")
        key_error = _key_error(lit, "<nil>")
        if key_error:
            raise ValueError(key_error)
        key = lit
        if operator == "!" or self._peek()[0] in ("EOS", "COMMA"):
            # Go returns right after '!key'; anything but ',' then fails in parse().
            return _requirement(key, operator or "exists", [])
        tok, lit = self._next(values=False)
        if tok not in _OPERATORS:
            raise ValueError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        op = _OPERATORS[tok]
        values = self._set_values() if op in ("in", "notin") else self._exact_value()
        return _requirement(key, op, sorted(values))

    def _set_values(self) -> set[str]:
        tok, lit = self._next()
        if tok != "OPEN":
            raise ValueError(f"found '{lit}' expected: '('")
        tok, lit = self._peek()
        if tok == "CLOSE":
            self._next()
            return {""}
        if tok not in ("ID", "COMMA"):
            raise ValueError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self._identifiers()
        if self._next()[0] != "CLOSE":
            raise ValueError(f"found '{lit}', expected: ')'")
        return values

    def _identifiers(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self._next()
            if tok == "ID":
                values.add(lit)
                tok2, lit2 = self._peek()
                if tok2 == "COMMA":
                    continue
                if tok2 == "CLOSE":
                    return values
                raise ValueError(f"found '{lit2}', expected: ',' or ')'")
            if tok == "COMMA":
                if not values:
                    values.add("")
                tok2, _ = self._peek()
                if tok2 == "CLOSE":
                    values.add("")
                    return values
                if tok2 == "COMMA":
                    self._next()
                    values.add("")
                continue
            raise ValueError(f"found '{lit}', expected: ',', or identifier")

    def _exact_value(self) -> set[str]:
        if self._peek()[0] in ("EOS", "COMMA"):
            return {""}
        tok, lit = self._next()
        if tok == "ID":
            return {lit}
        raise ValueError(f"found '{lit}', expected: identifier")


def _key_error(key: str, path: str) -> str:
    problems = names.qualified_name_errors(key)
    if not problems:
        return ""
    return str(FieldError("Invalid value", path, key, "; ".join(problems)))


def _requirement(key: str, op: str, values: list[str]) -> Requirement:
    errors: list[FieldError] = []
    key_problems = names.qualified_name_errors(key)
    if key_problems:
        errors.append(FieldError("Invalid value", "key", key, "; ".join(key_problems)))
    if op in ("in", "notin") and not values:
        errors.append(
            FieldError(
                "Invalid value",
                "values",
                values,
                "for 'in', 'notin' operators, values set can't be empty",
            )
        )
    if op in ("gt", "lt"):
        for i, value in enumerate(values):
            if not value.lstrip("-").isdigit():
                errors.append(
                    FieldError(
                        "Invalid value",
                        f"values[{i}]",
                        value,
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    )
                )
    for i, value in enumerate(values):
        problems = names.label_value_errors(value)
        if problems:
            errors.append(
                FieldError("Invalid value", f"values[{i}][{key}]", value, "; ".join(problems))
            )
    if errors:
        raise ValueError(aggregate(errors))
    return Requirement(key, op, tuple(values))


def parse_label_selector(text: str) -> tuple[Requirement, ...]:
    """Parse ``labelSelector``; a malformed one is a 400 with the real wording."""
    try:
        requirements = _Parser(text).parse()
    except ValueError as err:
        raise bad_request(str(err)) from None
    return tuple(sorted(requirements, key=lambda r: r.key))


def match_labels(requirements: tuple[Requirement, ...], labels: Mapping[str, str] | None) -> bool:
    labels = labels or {}
    return all(r.matches(labels) for r in requirements)


# Every kind's, and those of a core/v1 Event that mxgitops selects by (the API server
# refuses the latter on other kinds; the double does not check which kind is listed).
FIELD_LABELS = (
    "metadata.name",
    "metadata.namespace",
    "involvedObject.kind",
    "involvedObject.name",
    "involvedObject.namespace",
    "reason",
)


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str

    def matches(self, obj: Mapping[str, object]) -> bool:
        have: object = obj
        for part in self.field.split("."):
            have = have.get(part, "") if isinstance(have, dict) else ""
        return bool(have == self.value) == self.equal


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], "", False
    for ch in text:
        if escaped:
            current += "\\" + ch
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current + ("\\" if escaped else ""))
    return parts


def _unescape(value: str) -> str:
    out, i = "", 0
    while i < len(value):
        if value[i] == "\\" and i + 1 < len(value) and value[i + 1] in "\\,=":
            out += value[i + 1]
            i += 2
        else:
            out += value[i]
            i += 1
    return out


def parse_field_selector(text: str) -> tuple[FieldRequirement, ...]:
    """Parse ``fieldSelector`` (``fields.ParseSelector``) for `FIELD_LABELS`."""
    requirements: list[FieldRequirement] = []
    if not text:
        return ()
    for term in _split_unescaped(text, ","):
        if not term:
            continue
        op = next((o for o in ("!=", "==", "=") if o in term), None)
        if op is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        lhs, rhs = term.split(op, 1)
        if lhs not in FIELD_LABELS:
            raise bad_request(
                f'"{lhs}" is not a known field selector: only "metadata.name", "metadata.namespace"'
            )
        requirements.append(FieldRequirement(lhs, op != "!=", _unescape(rhs)))
    return tuple(requirements)


def match_fields(requirements: tuple[FieldRequirement, ...], obj: Mapping[str, object]) -> bool:
    return all(r.matches(obj) for r in requirements)


__all__ = [
    "ApiError",
    "FieldRequirement",
    "Requirement",
    "match_fields",
    "match_labels",
    "parse_field_selector",
    "parse_label_selector",
]
