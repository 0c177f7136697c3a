"""Validated manifests, remembered per Git tree between syncs.

Most syncs find no new commit. Their manifests are then byte for byte the ones
the previous sync validated: a Git tree id names its files exactly. So the
result of `manifests.load` is kept beside the Git cache, keyed by that tree
id, the settings that shape it, and a fingerprint of mxgitops' own code and
schemas (a changed rule must never reuse an old verdict). A missing, stale or
unreadable entry only means validating again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict
from functools import cache
from pathlib import Path
from typing import Any

from mxgitops.manifests import Ignored, LoadResult, Problem
from mxgitops.spec import MxJob

PACKAGE = Path(__file__).resolve().parent


def load(
    cache_file: Path, tree_id: str, settings: tuple[object, ...], validate: Callable[[], LoadResult]
) -> LoadResult:
    """The remembered result for this tree and these settings, or `validate()`'s, kept."""
    key = _key(tree_id, settings)
    remembered = _read(cache_file, key)
    if remembered is not None:
        return remembered
    result = validate()
    _write(cache_file, key, result)
    return result


def _key(tree_id: str, settings: tuple[object, ...]) -> str:
    return hashlib.sha256(
        json.dumps([tree_id, _code_fingerprint(), *settings]).encode()
    ).hexdigest()


@cache
def _code_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.json")]):
        digest.update(path.relative_to(PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _read(cache_file: Path, key: str) -> LoadResult | None:
    try:
        data = json.loads(cache_file.read_text(encoding="utf-8"))
        return _decode(data["result"]) if data.get("key") == key else None
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or damaged: validate again


def _write(cache_file: Path, key: str, result: LoadResult) -> None:
    """Atomically, and never failing the sync: the cache is only an optimisation."""
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        partial = cache_file.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(json.dumps({"key": key, "result": _encode(result)}), encoding="utf-8")
        partial.replace(cache_file)
    except OSError:
        pass


def _encode(result: LoadResult) -> dict[str, Any]:
    return {
        "jobs": [job.to_dict() for job in result.jobs],
        "problems": [asdict(p) for p in result.problems],
        "ignored": [asdict(i) for i in result.ignored],
        "invalid_keys": sorted(result.invalid_keys),
        "invalid_manifests": result.invalid_manifests,
        "unnamed_invalid": result.unnamed_invalid,
        "warnings": [asdict(w) for w in result.warnings],
        "held": [job.to_dict() for job in result.held],
    }


def _decode(data: dict[str, Any]) -> LoadResult:
    return LoadResult(
        jobs=[MxJob.from_dict(job) for job in data["jobs"]],
        problems=[Problem(**p) for p in data["problems"]],
        ignored=[Ignored(**i) for i in data["ignored"]],
        invalid_keys=frozenset((ns, name) for ns, name in data["invalid_keys"]),
        invalid_manifests=data["invalid_manifests"],
        unnamed_invalid=data["unnamed_invalid"],
        warnings=[Problem(**w) for w in data["warnings"]],
        held=[MxJob.from_dict(job) for job in data["held"]],
    )
