"""`convert`'s reading and its proof: manifests read as validate reads them, and a
conversion checked by reading its result back the same way.

What runs is what `validate` and `sync` read (YAML 1.1 through PyYAML, within
`yamldoc`'s bounds), not what ruamel's round trip reads (YAML 1.2: `010` is 10
there, 8 here), so the job a conversion starts from, and the one it ends with,
are both read here. `prove` renders both and compares the objects.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from mxgitops.errors import ManifestError
from mxgitops.manifests.dialects import version_of
from mxgitops.manifests.schema import schema_problems
from mxgitops.manifests.spec import dump_fields, from_manifest
from mxgitops.manifests.yamldoc import YamlError, documents
from mxgitops.model import DEFAULT_RUNTIME, MxJob, SpecError, format_path
from mxgitops.runtimes.registry import RUNTIMES
from mxgitops.runtimes.shared.podtemplate import RenderContext


def as_validate_reads(text: str, name: str) -> list[Any]:
    """Each document's data as validate and sync read it: YAML 1.1, bounded."""
    try:
        return [document.data for document in documents(text)]
    except YamlError as error:
        raise ManifestError(f"{name}:{error.line}: {error.message}") from error


def prove(original: str, converted: str, *, name: str) -> dict[str, tuple[str, ...]]:
    """Each job of `converted`, read back as validate reads it, renders the objects
    `original` renders (the runtime's names and the spec hash aside): ManifestError if
    one does not, unless its spec hash changes, which the conversions that change it
    (a seed PsRootPort, a restart policy's place) do knowingly: then what changes in
    its objects is returned, by job, to be said."""
    before, after = dict(_rendered(original, name)), dict(_rendered(converted, name))
    if before.keys() != after.keys():
        raise ManifestError(
            f"{name}: the converted manifests name other jobs ({', '.join(sorted(after))}) "
            f"than the original ({', '.join(sorted(before))}); nothing is written"
        )
    changes = {}
    for job_name, (job, objects) in before.items():
        converted_job, converted_objects = after[job_name]
        moved = _differences(objects, _renamed(converted_objects, converted_job, job))
        if (moved and converted_job.spec_hash == job.spec_hash) or _runs_otherwise(moved):
            raise ManifestError(
                f"{name}: job {job_name}: the converted manifest would run something else "
                f"({'; '.join(moved[:3])}); nothing is written"
            )
        changes[job_name] = tuple(dict.fromkeys(m.split(" ", 1)[0] for m in moved))
    return changes


_CONTEXT = RenderContext(instance="convert")
# What a conversion may knowingly change in the objects: the scheduler's named port,
# which is where kubeflow.org/v1 keeps a seed PsRootPort.
_KNOWN = ("spec.template.spec.containers[0].ports",)


def _runs_otherwise(moved: Sequence[str]) -> bool:
    return any(not m.split(" ", 1)[0].split(":", 1)[-1].startswith(_KNOWN) for m in moved)


def _rendered(text: str, name: str) -> Iterator[tuple[str, tuple[MxJob, list[Any]]]]:
    for data in as_validate_reads(text, name):
        if isinstance(data, dict) and version_of(data) is not None:
            job = job_of(cleaned(data), name)
            yield job.name, (job, RUNTIMES[DEFAULT_RUNTIME].render(job, _CONTEXT))


def _renamed(objects: list[Any], converted: MxJob, original: MxJob) -> list[Any]:
    """`objects` with the converted job's runtime id and spec hashes as the original's."""
    text = json.dumps(objects)
    for new, old in (
        (converted.runtime_id, original.runtime_id),
        (converted.spec_hash, original.spec_hash),
        (converted.legacy_spec_hash, original.legacy_spec_hash),
    ):
        text = text.replace(new, old)
    renamed: list[Any] = json.loads(text)
    return renamed


def _differences(before: list[Any], after: list[Any]) -> list[str]:
    """`kind/name:field: a -> b` for each leaf that differs (objects in render order)."""
    if len(before) != len(after):
        return [f"objects: {len(before)} -> {len(after)}"]
    found: list[str] = []
    for old, new in zip(before, after, strict=True):
        where = f"{old.get('kind', '?')}/{(old.get('metadata') or {}).get('name', '?')}"
        found += [f"{where}:{path} {a} -> {b}" for path, a, b in _leaves(old, new, "")]
    return found


def _leaves(a: Any, b: Any, path: str) -> Iterator[tuple[str, str, str]]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from _leaves(a.get(key), b.get(key), f"{path}.{key}" if path else key)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _leaves(x, y, f"{path}[{index}]")
    elif a != b:
        yield path, json.dumps(a)[:60], json.dumps(b)[:60]


def cleaned(manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` without what `_clean_dump` removes from the nodes."""
    cleaned = dict(manifest)
    if isinstance(manifest.get("metadata"), dict):
        cleaned["metadata"] = dict(manifest["metadata"])
    for dump_field in dump_fields(manifest):
        if dump_field == "status":
            cleaned.pop("status", None)
        else:
            cleaned["metadata"].pop(dump_field.removeprefix("metadata."), None)
    if cleaned.get("status") == {}:
        cleaned.pop("status")
    return cleaned


def job_of(manifest: dict[str, Any], name: str) -> MxJob:
    version = version_of(manifest)
    assert version is not None
    problems = [(p.path, p.message) for p in schema_problems(version.dialect, manifest)]
    if not problems:
        try:
            return from_manifest(manifest)
        except SpecError as error:
            problems = [(p.path, p.message) for p in error.problems]
    job_name = (manifest.get("metadata") or {}).get("name", "?")
    details = "; ".join(f"{format_path(tuple(path))}: {message}" for path, message in problems)
    raise ManifestError(
        f"{name}: job {job_name} is invalid, fix it first (mxgitops validate): {details}"
    )
