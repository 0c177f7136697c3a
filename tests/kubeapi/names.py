"""Name, label-key and label-value rules with apimachinery's messages.

Ported from ``k8s.io/apimachinery/pkg/util/validation``: each function
returns the list of problems (empty when valid) with the exact strings the
real server puts into ``Invalid value`` causes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache, wraps

DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = DNS1123_LABEL + r"(\." + DNS1123_LABEL + ")*"
DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
QUALIFIED_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"

_RX = {
    name: re.compile(f"^{pattern}$")
    for name, pattern in {
        "label": DNS1123_LABEL,
        "subdomain": DNS1123_SUBDOMAIN,
        "dns1035": DNS1035_LABEL,
        "qualified": QUALIFIED_NAME,
        "value": LABEL_VALUE,
    }.items()
}


class Check:
    """A name rule with its answers remembered: a run validates the same few thousand
    names, label keys and values over and over. Each call still gets a list of its own.

    `valid` holds strings the rule found no problem in, so that a caller checking
    many (the labels of every object) can skip the call for those it has seen."""

    def __init__(self, check: Callable[[str], list[str]]) -> None:
        self._check = check
        self._cached = lru_cache(maxsize=_REMEMBERED)(lambda value: tuple(check(value)))
        self.valid: set[str] = set()
        wraps(check)(self)

    def __call__(self, value: str) -> list[str]:
        try:
            problems = self._cached(value)
        except TypeError:  # not hashable: not a string, the rule says why
            return self._check(value)
        if not problems and type(value) is str:
            if len(self.valid) >= _REMEMBERED:  # bounded like the cache: start over
                self.valid.clear()
            self.valid.add(value)
        return list(problems)


_REMEMBERED = 32768


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    shown = ",  or ".join(f"'{e}'" for e in examples)
    return f"{message} (e.g. {shown}, regex used for validation is '{pattern}')"


def _max_len(length: int) -> str:
    return f"must be no more than {length} characters"


@Check
def dns1123_subdomain_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 253:
        errors.append(_max_len(253))
    if not _RX["subdomain"].match(value):
        errors.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
                DNS1123_SUBDOMAIN,
                "example.com",
            )
        )
    return errors


@Check
def dns1123_label_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append(_max_len(63))
    if not _RX["label"].match(value):
        errors.append(
            _regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                "or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL,
                "my-name",
                "123-abc",
            )
        )
    return errors


@Check
def dns1035_label_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append(_max_len(63))
    if not _RX["dns1035"].match(value):
        errors.append(
            _regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character",
                DNS1035_LABEL,
                "my-name",
                "abc-123",
            )
        )
    return errors


@Check
def qualified_name_errors(value: str) -> list[str]:
    """``IsQualifiedName``: label and annotation keys."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend("prefix part " + e for e in dns1123_subdomain_errors(prefix))
    else:
        return [
            _regex_error(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character",
                QUALIFIED_NAME,
                "MyName",
                "my.name",
                "123-abc",
            )
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part " + _max_len(63))
    if name and not _RX["qualified"].match(name):
        errors.append(
            _regex_error(
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                "start and end with an alphanumeric character",
                QUALIFIED_NAME,
                "MyName",
                "my.name",
                "123-abc",
            )
        )
    return errors


@Check
def label_value_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append(_max_len(63))
    if not _RX["value"].match(value):
        errors.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                LABEL_VALUE,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errors
