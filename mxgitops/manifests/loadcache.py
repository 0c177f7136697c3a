"""Validated manifests, remembered per file between syncs.

Most syncs find no new commit, and a new commit changes a few files. What a
file was found to be (`manifests.FileVerdict`) depends only on its name and
text (`manifests.verdict_key`), the settings that shape validation, and
mxgitops' own code and schemas (a changed rule must never reuse an old
verdict). So the verdicts are kept in one file per manifest directory: beside
the Git cache for a repository, under the cache directory for a plain
directory. A sync then validates only the files it has not seen; the check
across files (a job defined twice) runs every time, as it is cheap. A missing,
stale or damaged entry only means validating that file again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from mxgitops.manifests.files import Problem
from mxgitops.manifests.loading import FileVerdict, Ignored, LoadResult, Named
from mxgitops.model import MxJob, fields_of

PACKAGE = Path(__file__).resolve().parents[1]


def load(
    cache_file: Path,
    settings: tuple[object, ...],
    validate: Callable[[Remembered], LoadResult],
) -> LoadResult:
    """`validate(verdicts)`'s result, where `verdicts` are those the last sync with
    these settings kept; then only the verdicts this load used are kept."""
    key = _key(settings)
    verdicts = Remembered(_read(cache_file, key))
    result = validate(verdicts)
    if verdicts.changed:
        _write(cache_file, key, verdicts.kept())
    return result


def directory_cache(cache_dir: Path, directory: Path) -> Path:
    """Where the verdicts on a plain directory's files are kept."""
    name = hashlib.sha256(str(directory.resolve()).encode("utf-8", "surrogateescape"))
    return cache_dir / "verdicts" / f"{name.hexdigest()[:32]}.json"


class Remembered:
    """The verdicts read from the cache file, decoded only when asked for, and those
    added by this load (`manifests.Verdicts`)."""

    def __init__(self, stored: dict[str, Any]) -> None:
        self._stored = stored
        self._used: set[str] = set()
        self._added: dict[str, FileVerdict] = {}

    def get(self, key: str, /) -> FileVerdict | None:
        if key in self._added:
            return self._added[key]
        try:
            verdict = _decode(self._stored[key])
        except (KeyError, TypeError, ValueError, AttributeError):
            return None  # not seen, or damaged: validated again
        self._used.add(key)
        return verdict

    def __setitem__(self, key: str, verdict: FileVerdict, /) -> None:
        self._added[key] = verdict

    @property
    def changed(self) -> bool:
        """Whether a file was validated, or a kept verdict is no longer used."""
        return bool(self._added) or len(self._used) != len(self._stored)

    def kept(self) -> dict[str, Any]:
        """What to keep: the verdicts this load used or made (a removed file's go)."""
        used = {key: self._stored[key] for key in self._used}
        return used | {key: _encode(verdict) for key, verdict in self._added.items()}


def _key(settings: tuple[object, ...]) -> str:
    return hashlib.sha256(json.dumps([_code_fingerprint(), *settings]).encode()).hexdigest()


@cache
def _code_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.json")]):
        digest.update(path.relative_to(PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _read(cache_file: Path, key: str) -> dict[str, Any]:
    try:
        data = json.loads(cache_file.read_text(encoding="utf-8"))
        files = data["files"] if data.get("key") == key else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}  # absent or damaged: validate again
    return files if isinstance(files, dict) else {}


def _write(cache_file: Path, key: str, files: dict[str, Any]) -> None:
    """Atomically, and never failing the sync: the cache is only an optimisation."""
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        partial = cache_file.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(json.dumps({"key": key, "files": files}), encoding="utf-8")
        partial.replace(cache_file)
    except OSError:
        pass


def _encode(verdict: FileVerdict) -> dict[str, Any]:
    return {
        "named": [
            {**fields_of(n), "job": n.job.to_dict() if n.job is not None else None}
            for n in verdict.named
        ],
        "problems": [fields_of(p) for p in verdict.problems],
        "warnings": [fields_of(w) for w in verdict.warnings],
        "ignored": [fields_of(i) for i in verdict.ignored],
        "invalid": sorted(verdict.invalid),
        "unnamed_invalid": verdict.unnamed_invalid,
    }


def _decode(data: dict[str, Any]) -> FileVerdict:
    return FileVerdict(
        named=tuple(
            Named(
                **{
                    **n,
                    "key": tuple(n["key"]),
                    "job": MxJob.from_dict(n["job"]) if n["job"] is not None else None,
                }
            )
            for n in data["named"]
        ),
        problems=tuple(Problem(**p) for p in data["problems"]),
        warnings=tuple(Problem(**w) for w in data["warnings"]),
        ignored=tuple(Ignored(**i) for i in data["ignored"]),
        invalid=frozenset((str(file), int(index)) for file, index in data["invalid"]),
        unnamed_invalid=int(data["unnamed_invalid"]),
    )
