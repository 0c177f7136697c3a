"""The JSON schemas of every manifest version, and readable messages from them.

The schemas (generated into schemas/ and shipped as package data) settle
types and unknown fields, the Kubernetes pod template included. jsonschema-rs
answers valid-or-not quickly; only an invalid manifest goes through Python
jsonschema, whose errors carry what a message a person can act on needs: the
field, what was expected, what was found, and a "did you mean" for typos.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema_rs

from mxgitops.manifests.dialects import VERSIONS
from mxgitops.manifests.yamldoc import Issue
from mxgitops.model import Dialect

if TYPE_CHECKING:  # Python jsonschema is imported only for an invalid manifest
    import jsonschema
    from jsonschema.exceptions import ValidationError

# The one Kubernetes version of the pod-template schema: the generator reads this
# version's PodTemplateSpec from kubernetes-validate, and the tests check rendered
# objects against it and run the test control plane of the same minor version.
KUBERNETES_VERSION = "v1.34.0"

SCHEMA_FILES = {dialect: version.schema_file for dialect, version in VERSIONS.items()}
# The package data, read as files beside this module (as loadcache reads the package):
# importlib.resources.files() alone costs more than reading and parsing a schema.
SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"


@cache
def schema(dialect: Dialect) -> dict[str, Any]:
    """The JSON schema of a dialect, from the package data: read, like its validators
    below, only when a manifest of that dialect is checked."""
    text = (SCHEMA_DIR / SCHEMA_FILES[dialect]).read_text(encoding="utf-8")
    result: dict[str, Any] = json.loads(text)
    return result


@cache
def _fast(dialect: Dialect) -> jsonschema_rs.Validator:
    return jsonschema_rs.validator_for(schema(dialect))


@cache
def _detailed(dialect: Dialect) -> jsonschema.Draft202012Validator:
    import jsonschema  # a third of a second to import: only when a manifest is invalid

    return jsonschema.Draft202012Validator(schema(dialect))


def schema_problems(dialect: Dialect, data: Mapping[str, Any]) -> list[Issue]:
    """Readable (field path, message) pairs for every distinct schema violation.

    jsonschema-rs answers valid-or-not quickly; only an invalid manifest goes
    through Python jsonschema, whose errors carry what a readable message needs.
    """
    if _fast(dialect).is_valid(data):
        return []
    found: dict[Issue, None] = {}
    for error in _detailed(dialect).iter_errors(data):
        for item in _readable(error):
            found.setdefault(item)
    if not found:  # the two validators disagree: report what the fast one says
        for fast_error in _fast(dialect).iter_errors(data):
            found.setdefault(Issue(tuple(fast_error.instance_path), str(fast_error.message)))
    return list(found)


def _readable(error: ValidationError) -> Iterator[Issue]:
    path = tuple(error.absolute_path)
    keyword, instance = error.validator, error.instance
    expected: Any = error.validator_value
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    if keyword == "additionalProperties" and expected is False and isinstance(instance, dict):
        from difflib import get_close_matches  # only an invalid manifest needs it

        known = list(schema.get("properties", {}))
        patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
        for name in instance:
            if name not in known and not any(p.search(str(name)) for p in patterns):
                close = get_close_matches(str(name), known, n=1)
                hint = f'; did you mean "{close[0]}"?' if close else ""
                yield Issue(path, f'unknown field "{name}"{hint}', (*path, name))
    elif keyword == "required" and isinstance(instance, dict):
        for name in expected:
            if name not in instance:
                yield Issue((*path, name), "is required")
    elif keyword in ("oneOf", "anyOf") and error.context:
        kinds = {e.validator for e in error.context}
        if kinds == {"type"}:
            types = [t for e in error.context for t in _types(e.validator_value)]
            yield Issue(path, f"must be {_alternatives(types)}, not {_show(instance)}")
        else:
            from jsonschema.exceptions import best_match

            yield from _readable(best_match(error.context))
    else:
        yield Issue(path, _message(keyword, expected, instance, error.message))


def _message(keyword: Any, expected: Any, instance: Any, default: str) -> str:
    if keyword == "type":
        return f"must be {_alternatives(_types(expected))}, not {_show(instance)}"
    if keyword == "enum":
        return f"must be one of {', '.join(map(_show, expected))}; not {_show(instance)}"
    if keyword == "const":
        return f"must be {_show(expected)}, not {_show(instance)}"
    if keyword in ("minimum", "exclusiveMinimum"):
        return f"must be at least {expected}, not {_show(instance)}"
    if keyword in ("maximum", "exclusiveMaximum"):
        return f"must be at most {expected}, not {_show(instance)}"
    if keyword in ("minItems", "minProperties", "minLength") and expected == 1:
        return "must not be empty"
    return str(default)


_TYPE_NAMES = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
}


def _types(expected: Any) -> list[str]:
    types = [expected] if isinstance(expected, str) else list(expected)
    return [t for t in types if t != "null"] or types


def _alternatives(types: list[str]) -> str:
    names = list(dict.fromkeys(_TYPE_NAMES.get(t, t) for t in types))
    return " or ".join(names)


def _show(value: Any) -> str:
    if isinstance(value, dict | list):
        return describe(value)
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + '..."'


def describe(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return _show(value)
