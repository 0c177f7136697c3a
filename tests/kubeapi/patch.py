"""The three PATCH flavours kube-apiserver accepts for built-in types.

* JSON merge patch (RFC 7386, ``application/merge-patch+json``);
* JSON patch (RFC 6902, ``application/json-patch+json``);
* strategic merge patch (``application/strategic-merge-patch+json``): like a
  merge patch, but lists whose schema carries ``x-kubernetes-patch-strategy:
  merge`` are merged by their ``x-kubernetes-patch-merge-key`` (containers by
  name, env by name, ports by containerPort ...), and the ``$patch``,
  ``$setElementOrder/``, ``$deleteFromPrimitiveList/`` and ``$retainKeys``
  directives kubectl emits are understood.  Patch strategies come from the
  same v1.32 schemas the validator uses (see :mod:`.schema`).

Server-side apply (``application/apply-patch+yaml``) is not implemented.
"""

from __future__ import annotations

import copy
from typing import Any

from . import schema
from .errors import ApiError, bad_request

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH, STRATEGIC_MERGE_PATCH)


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unprocessable(message: str) -> ApiError:
    return ApiError(422, "Invalid", message)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _unprocessable(f'jsonpatch: invalid path "{path}"')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _container(doc: Any, parts: list[str], path: str) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise _unprocessable(f'doc is missing path: "{path}": missing value') from None
    return node, parts[-1]


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    node, last = _container(doc, parts, path)
    try:
        return node[int(last)] if isinstance(node, list) else node[last]
    except (KeyError, IndexError, ValueError, TypeError):
        raise _unprocessable(f'doc is missing key: "{path}": missing value') from None


def _remove(doc: Any, path: str) -> Any:
    node, last = _container(doc, _pointer(path), path)
    try:
        return node.pop(int(last)) if isinstance(node, list) else node.pop(last)
    except (KeyError, IndexError, ValueError):
        raise _unprocessable(f"Unable to remove nonexistent key: {last}: missing value") from None


def _add(doc: Any, path: str, value: Any, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    node, last = _container(doc, parts, path)
    if isinstance(node, list):
        index = len(node) if last == "-" else int(last)
        if index > len(node) or index < 0:
            raise _unprocessable(f'add operation does not apply: doc is missing path: "{path}"')
        if replace:
            node[index] = value
        else:
            node.insert(index, value)
    elif isinstance(node, dict):
        if replace and last not in node:
            raise _unprocessable(f"replace operation does not apply: doc is missing key: {path}")
        node[last] = value
    else:
        raise _unprocessable(f'doc is missing path: "{path}"')
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(target)
    for op in operations:
        kind, path = op.get("op"), op.get("path", "")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op.get("value")), replace=True)
        elif kind in ("move", "copy"):
            value = _get(doc, op.get("from", ""))
            if kind == "move":
                _remove(doc, op.get("from", ""))
            doc = _add(doc, path, copy.deepcopy(value))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise _unprocessable(f"testing value {path} failed: test failed")
        else:
            raise _unprocessable(f"Unexpected kind: {kind}")
    return doc


def strategic_merge_patch(target: Any, patch: Any, node: dict[str, Any] | None) -> Any:
    """Apply a strategic merge patch; ``node`` is the schema of ``target``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        child = schema.child_schema(node, key) if node else None
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, child)
        else:
            result[key] = strategic_merge_patch(result.get(key), value, child)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(current: Any, patch: list[Any], node: dict[str, Any] | None) -> list[Any]:
    strategy, key = schema.patch_strategy(node)
    if "merge" not in strategy.split(","):
        return [v for v in copy.deepcopy(patch) if not (isinstance(v, dict) and "$patch" in v)]
    items = list(current) if isinstance(current, list) else []
    item_schema = schema.child_schema(node, 0) if node else None
    if not key:  # merge strategy on a list of primitives: union
        return items + [v for v in patch if v not in items]
    for entry in patch:
        if not isinstance(entry, dict):
            raise bad_request(f"map: {entry} does not contain declared merge key: {key}")
        directive = entry.get("$patch")
        if directive == "replace":
            return [copy.deepcopy(e) for e in patch if e.get("$patch") != "replace"]
        if key not in entry:
            raise bad_request(f"map: {entry} does not contain declared merge key: {key}")
        index = next(
            (
                i
                for i, item in enumerate(items)
                if isinstance(item, dict) and item.get(key) == entry[key]
            ),
            None,
        )
        if directive == "delete":
            if index is not None:
                items.pop(index)
        elif index is None:
            items.append(strategic_merge_patch({}, entry, item_schema))
        else:
            items[index] = strategic_merge_patch(items[index], entry, item_schema)
    return items
