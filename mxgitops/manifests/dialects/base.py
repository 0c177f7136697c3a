"""What a dialect module gives: a `Version` that reads a manifest's spec into parts
of the one `MxJob` model.

A module per API group and version (see `__init__.py`) describes its document
and converts it, the way a CRD conversion converts into the storage version:
older spellings and fields become the model's, defaults of that version's
operator are made explicit, and whatever the model cannot hold is either
refused (a problem) or said plainly (a warning). Nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mxgitops.model import (
    KUBEFLOW_API_VERSION,
    KUBEFLOW_KIND,
    MAX_REPLICAS,
    Dialect,
    FieldProblem,
    JobMode,
    Path,
    ReplicaSpec,
    RunPolicy,
    SuccessPolicy,
)


@dataclass
class Reading:
    """The parts of an MxJob one version's spec gives, with what is wrong or worth a word."""

    replicas: list[ReplicaSpec]
    mode: JobMode | None = None  # as declared (local|dist); None: inferred from the types
    run_policy: RunPolicy = field(default_factory=RunPolicy)
    success_policy: SuccessPolicy = SuccessPolicy.SCHEDULER
    # schedulingPolicy as written, and where: the queue in it picks the runtime, and what
    # the runtime cannot honour is warned about once the runtime is known (spec.py).
    scheduling: Mapping[str, Any] = field(default_factory=dict)
    scheduling_path: Path = ()
    problems: list[FieldProblem] = field(default_factory=list)
    warnings: list[FieldProblem] = field(default_factory=list)


@dataclass(frozen=True)
class Version:
    dialect: Dialect
    kind: str
    schema_file: str  # in schemas/ and the package data
    replicas_field: str  # "replicaSpecs" (list form) or "mxReplicaSpecs" (map form)
    read: Callable[[Mapping[str, Any]], Reading]  # spec -> Reading
    current: bool = False  # False: an older version, read with a note to migrate
    # The message for a field this version has not (a later one's), by its path: the
    # schema refuses it as unknown, and validate says where it went instead.
    unknown_field_hints: Mapping[Path, str] = field(default_factory=dict, hash=False)

    @property
    def api_version(self) -> str:
        return self.dialect.value

    def older_version_note(self) -> FieldProblem | None:
        """The per-document note of an older version: what it was read as, what to use."""
        if self.current:
            return None
        return FieldProblem(
            ("apiVersion",),
            f"read as {self.api_version} {self.kind}, an older API version; its current "
            f"equivalent is {KUBEFLOW_API_VERSION} {KUBEFLOW_KIND} "
            "(mxgitops convert FILE rewrites it, comments kept)",
        )


def canonical_keys(
    raw: Mapping[str, Any], names: Iterable[str], path: Path, warnings: list[FieldProblem]
) -> tuple[dict[str, Any], list[FieldProblem]]:
    """`raw` with its keys spelled as `names`, matched regardless of case.

    The operators of 2017-2018 decoded manifests with Go's encoding/json, which
    matches field names case-insensitively: `psRootPort` was read as
    `PsRootPort`. Each such spelling gets a warning; two spellings of one field
    are a problem.
    """
    by_folded = {name.lower(): name for name in names}
    result: dict[str, Any] = {}
    problems: list[FieldProblem] = []
    written: dict[str, str] = {}
    for key, value in raw.items():
        name = by_folded.get(str(key).lower(), str(key))
        if name in written:
            problems.append(
                FieldProblem((*path, key), f'"{key}" and "{written[name]}" both set {name}')
            )
            continue
        written[name] = str(key)
        if key != name:
            warnings.append(
                FieldProblem(
                    (*path, key),
                    f'spelled "{key}": read as "{name}", as the operator of that time did '
                    f'(it matched field names regardless of case); write "{name}"',
                )
            )
        result[name] = value
    return result, problems


def replica_count(raw: Mapping[str, Any], path: Path) -> tuple[int, list[FieldProblem]]:
    """The replica count (default 1), bounded: above MAX_REPLICAS nothing per replica runs."""
    count = int(raw.get("replicas", 1))
    if count > MAX_REPLICAS:
        message = f"must be at most {MAX_REPLICAS}, not {count}"
        return count, [FieldProblem((*path, "replicas"), message)]
    return count, []
