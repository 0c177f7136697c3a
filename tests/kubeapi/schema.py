"""Kubernetes v1.32.0 JSON schemas: decoding with ``fieldValidation``.

kube-apiserver decodes a request body into the Go type of its kind before any
validation runs.  Three things can go wrong there, and this module reproduces
each with the server's status and wording, using the strict schemas that
kubernetes-validate ships for v1.32.0 (``v1.32.0-local-strict``):

* a value of the wrong JSON type -> 400 BadRequest
  ``Job in version "v1" cannot be handled as a Job: json: cannot unmarshal ...``
* unknown fields -> depending on ``fieldValidation``: Strict = 400 BadRequest
  ``strict decoding error: unknown field "spec.foo"``, Warn (the server default)
  = dropped plus a ``Warning`` header, Ignore = dropped silently;
* a field the schema requires that is missing -> reported later as a 422
  ``Required value`` cause (Go decoding never fails on a missing field).

Schemas are parsed once per process and one compiled validator is cached per
kind.  The same schemas drive strategic merge patch (``patch_meta``) through
their ``x-kubernetes-patch-merge-key`` / ``-strategy`` extensions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from importlib import resources as importlib_resources
from typing import Any

import jsonschema
import jsonschema_rs
from referencing import Registry, Resource

from mxgitops.manifests import schema

from .errors import ApiError, FieldError, bad_request
from .resources import Resource as KubeResource

# The release mxgitops' own schemas and the real control plane are pinned to.
KUBERNETES_VERSION = schema.KUBERNETES_VERSION
_SCHEMA_ROOT = importlib_resources.files("kubernetes_validate") / "kubernetes-json-schema"
_DEFS_URI = "https://kubernetes.io/api/_definitions.json"
_DEFS_PREFIX = "#/$defs/"


@cache
def _load(strict: bool, filename: str) -> dict[str, Any]:
    folder = KUBERNETES_VERSION + ("-local-strict" if strict else "-local")
    with (_SCHEMA_ROOT / folder / filename).open() as fh:
        data: dict[str, Any] = json.load(fh)
    return data


@cache
def definitions() -> dict[str, Any]:
    """All ``$defs`` of the strict schema set, by Go-qualified type name."""
    defs: dict[str, Any] = _load(True, "_definitions.json")["$defs"]
    return defs


@cache
def validator(res: KubeResource) -> jsonschema.protocols.Validator:
    """One compiled Draft 2020-12 validator per kind (strict schemas)."""
    root = _load(True, res.schema_file)
    registry: Registry[Any] = Registry().with_resources(
        [
            (_DEFS_URI, Resource.from_contents(_load(True, "_definitions.json"))),
            (root["$id"], Resource.from_contents(root)),
        ]
    )
    cls = jsonschema.validators.validator_for(root)
    return cls(root, registry=registry)


@cache
def fast_validator(res: KubeResource) -> Any:
    """The same schema compiled by jsonschema_rs: a valid body (the common case) is
    confirmed in microseconds; only an invalid one walks the errors above."""
    defs = _load(True, "_definitions.json")

    def retrieve(uri: str) -> dict[str, Any]:
        if uri != _DEFS_URI:
            raise ValueError(f"unknown schema {uri}")
        return defs

    return jsonschema_rs.validator_for(_load(True, res.schema_file), retriever=retrieve)


def root_schema(res: KubeResource) -> dict[str, Any]:
    return _load(True, res.schema_file)


def resolve(node: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """Follow a ``$ref`` into ``$defs``; returns (type name or None, schema)."""
    ref = node.get("$ref")
    if not ref:
        return None, node
    name = ref.split(_DEFS_PREFIX, 1)[1]
    return name, definitions()[name]


def child_schema(node: dict[str, Any], key: str | int) -> dict[str, Any] | None:
    """Schema of ``node``'s property or array item ``key`` (refs resolved)."""
    _, node = resolve(node)
    if isinstance(key, int):
        items: dict[str, Any] | None = node.get("items")
        return items
    props: dict[str, dict[str, Any]] = node.get("properties", {})
    if key in props:
        return props[key]
    extra = node.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def warm_up() -> None:
    """Load and compile everything once so the first request is fast."""
    from .resources import RESOURCES

    for res in RESOURCES:
        validator(res)
        fast_validator(res)


def _path(parts: Iterable[str | int]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "bool",
    int: "number",
    float: "number",
}


def _go_type(schema: dict[str, Any]) -> str:
    name, node = resolve(schema)
    if name:
        short = name.rsplit(".", 1)[-1]
        return {"Quantity": "resource.Quantity", "Time": "v1.Time"}.get(short, f"v1.{short}")
    types = node.get("type", [])
    kind = next((t for t in (types if isinstance(types, list) else [types]) if t != "null"), "")
    if kind == "integer":
        return "int64" if node.get("format") == "int64" else "int32"
    if kind == "array":
        return "[]" + _go_type(node.get("items", {}))
    if kind == "object":
        return "map[string]" + _go_type(node.get("additionalProperties") or {"type": "string"})
    return {"boolean": "bool", "number": "float64"}.get(kind, kind or "interface {}")


def _type_error(res: KubeResource, error: jsonschema.ValidationError) -> ApiError:
    """Go ``json.UnmarshalTypeError`` as the decoder reports it."""
    path = list(error.absolute_path)
    node: dict[str, Any] | None = root_schema(res)
    struct = res.kind
    for part in path[:-1]:
        node = child_schema(node, part) if node is not None else None
        if node is not None and "$ref" in node:
            struct = resolve(node)[0].rsplit(".", 1)[-1]  # type: ignore[union-attr]
    leaf = child_schema(node, path[-1]) if node is not None and path else None
    go_type = _go_type(leaf) if leaf else "interface {}"
    json_type = _JSON_TYPES.get(type(error.instance), "value")
    field = ".".join(str(p) for p in path if isinstance(p, str))
    return bad_request(
        f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: json: '
        f"cannot unmarshal {json_type} into Go struct field {struct}.{field} of type {go_type}"
    )


def decode(
    res: KubeResource, body: dict[str, Any], field_validation: str
) -> tuple[list[str], list[FieldError]]:
    """Check ``body`` against the kind's schema, dropping unknown fields in place.

    Returns (warnings, required-field errors).  Raises the 400 the server
    raises for type errors and, with ``Strict``, unknown fields.
    """
    unknown: list[tuple[list[str | int], str]] = []
    required: list[FieldError] = []
    unsupported: list[FieldError] = []
    valid = fast_validator(res).is_valid(body)
    for error in [] if valid else validator(res).iter_errors(body):
        kind = error.validator
        if kind == "additionalProperties":
            props = error.schema.get("properties", {})  # type: ignore[union-attr]
            instance: dict[str, Any] = error.instance  # type: ignore[assignment]
            for key in instance:
                if key not in props:
                    unknown.append((list(error.absolute_path), key))
        elif kind == "required":
            missing = error.message.split("'")[1]
            where = _path([*error.absolute_path, missing])
            required.append(FieldError("Required value", where))
        elif kind == "enum":
            allowed = ", ".join(json.dumps(v) for v in error.validator_value if v is not None)  # type: ignore[union-attr]
            unsupported.append(
                FieldError(
                    "Unsupported value",
                    _path(error.absolute_path),
                    error.instance,
                    f"supported values: {allowed}",
                )
            )
        else:  # type, oneOf (int-or-string), format ...
            raise _type_error(res, error)
    normalize_times(time_tree(res), body)
    warnings: list[str] = []
    if unknown:
        names = [_path([*where, key]) for where, key in unknown]
        if field_validation == "Strict":
            raise bad_request(
                f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: '
                "strict decoding error: " + ", ".join(f'unknown field "{n}"' for n in names)
            )
        for path, key in unknown:
            _drop(body, path, key)
        if field_validation != "Ignore":
            warnings = [f'unknown field "{n}"' for n in names]
    return warnings, required + unsupported


def _drop(body: Any, where: list[str | int], key: str) -> None:
    node = body
    for part in where:
        node = node[part]
    node.pop(key, None)


def patch_strategy(node: dict[str, Any] | None) -> tuple[str, str]:
    """(strategy, merge key) of a list field for strategic merge patch."""
    if not node:
        return "", ""
    return node.get("x-kubernetes-patch-strategy", ""), node.get("x-kubernetes-patch-merge-key", "")


# -- timestamps ---------------------------------------------------------------
# Go decodes metav1.Time / MicroTime and encodes them back as RFC 3339 in UTC
# ("2024-01-02T03:04:05Z", MicroTime with microseconds).  Clients may send
# other spellings ("+00:00" from Python's isoformat); normalising them keeps
# comparisons (immutability, no-op updates) and read-backs faithful.
_TimeTree = dict[str, Any]


def _time_tree(node: dict[str, Any], seen: frozenset[str] = frozenset()) -> _TimeTree | None:
    name, node = resolve(node)
    if name in seen:
        return None
    seen = seen | {name} if name else seen
    if node.get("format") == "date-time":
        return {"": "micro" if name and name.endswith("MicroTime") else "time"}
    tree: _TimeTree = {}
    for key, child in (node.get("properties") or {}).items():
        sub = _time_tree(child, seen)
        if sub:
            tree[key] = sub
    if isinstance(node.get("items"), dict):
        sub = _time_tree(node["items"], seen)
        if sub:
            tree["[]"] = sub
    return tree or None


@cache
def time_tree(res: KubeResource) -> _TimeTree:
    return _time_tree(root_schema(res)) or {}


def _canonical_time(value: str, micro: bool) -> str:
    from datetime import UTC, datetime

    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return value
    return parsed.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def normalize_times(tree: _TimeTree, value: Any) -> Any:
    """Rewrite every date-time field of ``value`` (in place) to Go's encoding."""
    if "" in tree:
        return _canonical_time(value, tree[""] == "micro") if isinstance(value, str) else value
    if isinstance(value, list) and "[]" in tree:
        for i, item in enumerate(value):
            value[i] = normalize_times(tree["[]"], item)
    elif isinstance(value, dict):
        for key, sub in tree.items():
            if key in value and value[key] is not None:
                value[key] = normalize_times(sub, value[key])
    return value
