"""Load and validate every job manifest under a path.

This is the gate between what people write and what mxgitops acts on. Each
YAML document is checked in order: the refusals of `spec.refusals` (MXTune),
the JSON schema of its dialect (types, unknown fields, the Kubernetes pod
template), then the model's own rules (`spec.read_manifest`). A problem is
reported with file, line, job and field path and never stops the other files.
Documents of other kinds (a ConfigMap) are listed as ignored.

Each file is validated on its own (`FileVerdict`), and only then are the files
checked against each other (a job defined twice): given `verdicts`, what a
file was found to be is reused while its name and text are the same, so a
sync validates only the files that changed (`loadcache` keeps them).

A job whose manifest is invalid is not desired, and its (namespace, name) is
in `invalid_keys`, so a sync can leave the live job alone rather than prune it.
Given a policy (`policy.py`), a valid job is checked against it last: what it
forbids is reported as `policy: ...` problems, and the job is `held`, neither
desired nor invalid, so that the plan holds it with the reason.
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from mxgitops.manifests import policy as rules
from mxgitops.manifests.dialects import VERSIONS, version_of
from mxgitops.manifests.dialects.base import Version
from mxgitops.manifests.files import MAX_FILE_SIZE, Problem, manifest_files, read_text
from mxgitops.manifests.schema import describe, schema_problems
from mxgitops.manifests.spec import read_manifest, refusals
from mxgitops.manifests.yamldoc import Document, FieldPath, Issue, YamlError, documents
from mxgitops.model import (
    DEFAULT_RUNTIME,
    KUBEFLOW_API_VERSION,
    KUBEFLOW_KIND,
    NAMESPACE,
    SEED_API_VERSION,
    SEED_KIND,
    FieldProblem,
    MxJob,
    SpecError,
    format_path,
)
from mxgitops.words import counted

Key = tuple[str, str]
StrPath = str | os.PathLike[str]


@dataclass(frozen=True)
class Ignored:
    """A document that is not an MxJob (a ConfigMap, a Kustomization...)."""

    file: str
    line: int
    api_version: str | None
    kind: str | None
    name: str | None

    def __str__(self) -> str:
        what = " ".join(filter(None, [self.kind or "document without kind", self.name]))
        return f"{self.file}:{self.line}: ignored {what}: not an MxJob"


@dataclass(frozen=True)
class LoadResult:
    jobs: list[MxJob]  # valid and unique, each with source_path set
    problems: list[Problem]
    ignored: list[Ignored]
    invalid_keys: frozenset[Key]  # jobs whose manifests are invalid (name known)
    invalid_manifests: int  # documents (or whole files) with at least one problem
    unnamed_invalid: int  # of those, how many name no job: a sync cannot tell which
    warnings: list[Problem] = field(default_factory=list)  # each with warning=True
    held: list[MxJob] = field(default_factory=list)  # valid, but the policy forbids them

    @property
    def ok(self) -> bool:
        return not self.problems

    def policy_holds(self) -> list[tuple[MxJob, str]]:
        """Each held job with what the policy forbids (its first violation, and how many)."""
        holds = []
        for job in self.held:
            found = [
                p.message.removeprefix("policy: ")
                for p in self.problems
                if (p.file, p.job) == (job.source_path, job.name)
                and p.message.startswith("policy: ")
            ]
            more = f", and {len(found) - 1} more" if len(found) > 1 else ""
            holds.append((job, (found[0] if found else "policy") + more))
        return holds

    def passes(self, *, strict: bool = False) -> bool:
        """Valid; with `strict`, also without warnings."""
        return self.ok and not (strict and self.warnings)

    def summary(self) -> str:
        warnings = [counted(len(self.warnings), "warning")] if self.warnings else []
        return ", ".join(
            [
                counted(len(self.jobs), "job") + " valid",
                counted(self.invalid_manifests, "invalid manifest"),
                counted(len(self.problems), "problem"),
                *warnings,
                counted(len(self.ignored), "document") + " ignored",
            ]
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "jobs": [
                {
                    "name": job.name,
                    "namespace": job.namespace,
                    "file": job.source_path,
                    "dialect": job.dialect.value,
                    "mode": job.mode.value,
                    "spec_hash": job.spec_hash,
                }
                for job in self.jobs
            ],
            "problems": [p.to_json() for p in self.problems],
            "warnings": [w.to_json() for w in self.warnings],
            "ignored": [
                {
                    "file": i.file,
                    "line": i.line,
                    "api_version": i.api_version,
                    "kind": i.kind,
                    "name": i.name,
                }
                for i in self.ignored
            ],
            "summary": self.summary(),
        }


def load(
    paths: StrPath | Iterable[StrPath],
    *,
    default_namespace: str = NAMESPACE,
    max_file_size: int = MAX_FILE_SIZE,
    policy: rules.Policy | None = None,
    verdicts: Verdicts | None = None,
    default_runtime: str = DEFAULT_RUNTIME,
    named_from: str = ".",
) -> LoadResult:
    """Validate every manifest under `paths` (files or directories), and, given a
    `policy`, check each valid job against it (a violation is a problem, and the job
    is `held`, not desired). A file whose verdict is in `verdicts` is not validated
    again; a file validated is added to them.

    File names in the result are relative to the directory given (a file given
    directly keeps the name it was given as), under `named_from`: the manifests'
    directory in the repository (`jobs/a.yaml` under `path: jobs`), so that sync,
    its note, `status`, `diff` and validate at the repository's root name each file
    the same way, in every message. Raise ConfigError for a path that does not
    exist; everything wrong inside the files is a Problem.
    """
    roots = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    loader = _Loader(default_namespace, max_file_size, policy, verdicts, default_runtime)
    loader.prefix = "" if PurePosixPath(named_from) == PurePosixPath(".") else f"{named_from}/"
    for root in roots:
        loader.load_root(Path(root))
    return loader.result()


# -- validation ----------------------------------------------------------------


@dataclass(frozen=True)
class Named:
    """An MxJob document whose key is known: for the duplicate check."""

    key: Key
    file: str
    index: int  # of the document in its file
    line: int
    job: MxJob | None  # None when its manifest is invalid
    refused: str = ""  # why, when the document is of a kind or mode mxgitops does not run
    held: bool = False  # valid, but the policy forbids it


@dataclass(frozen=True)
class FileVerdict:
    """What validating one file found, on its own (before the files are checked
    against each other): the same for the same name and text, settings and code."""

    named: tuple[Named, ...] = ()
    problems: tuple[Problem, ...] = ()
    warnings: tuple[Problem, ...] = ()
    ignored: tuple[Ignored, ...] = ()
    invalid: frozenset[tuple[str, int]] = frozenset()  # (file, document index; -1: all)
    unnamed_invalid: int = 0


class Verdicts(Protocol):
    """Verdicts by `verdict_key`, kept between loads made with the same settings."""

    def get(self, key: str, /) -> FileVerdict | None: ...

    def __setitem__(self, key: str, verdict: FileVerdict, /) -> None: ...


def verdict_key(name: str, text: str) -> str:
    """What a file's verdict depends on besides the settings: its name and its text."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(text.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


@dataclass
class _Loader:
    default_namespace: str
    max_file_size: int
    policy: rules.Policy | None = None
    verdicts: Verdicts | None = None
    default_runtime: str = DEFAULT_RUNTIME  # the operator's, for dist jobs naming no queue
    named: list[Named] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    ignored: list[Ignored] = field(default_factory=list)
    invalid: set[tuple[str, int]] = field(default_factory=set)
    unnamed_invalid: int = 0
    seen: set[Path] = field(default_factory=set)
    prefix: str = ""  # of every file name: `named_from` of `load`

    def load_root(self, root: Path) -> None:
        files, problems = manifest_files(root)
        for problem in problems:
            self._file_problem(replace(problem, file=self.prefix + problem.file))
        for name, real in files:
            if real not in self.seen:
                self.seen.add(real)
                self.load_file(self.prefix + name, real)

    def load_file(self, name: str, path: Path) -> None:
        try:
            text = read_text(path, self.max_file_size)
        except YamlError as error:
            self._file_problem(Problem(name, error.line, None, "", error.message))
            return
        key = verdict_key(name, text) if self.verdicts is not None else ""
        verdict = self.verdicts.get(key) if self.verdicts is not None else None
        if verdict is None:
            verdict = self._validate(name, text)
            if self.verdicts is not None:
                self.verdicts[key] = verdict
        self.named += verdict.named
        self.problems += verdict.problems
        self.warnings += verdict.warnings
        self.ignored += verdict.ignored
        self.invalid |= verdict.invalid
        self.unnamed_invalid += verdict.unnamed_invalid

    def _validate(self, name: str, text: str) -> FileVerdict:
        alone = _Loader(
            self.default_namespace, self.max_file_size, self.policy, None, self.default_runtime
        )
        try:
            for document in documents(text):
                alone.load_document(name, document)
        except YamlError as error:
            alone._file_problem(Problem(name, error.line, None, "", error.message))
        return FileVerdict(
            tuple(alone.named),
            tuple(alone.problems),
            tuple(alone.warnings),
            tuple(alone.ignored),
            frozenset(alone.invalid),
            alone.unnamed_invalid,
        )

    def load_document(self, name: str, document: Document) -> None:
        data = document.data
        if data is None:
            return
        if not isinstance(data, dict):
            problem = (
                f"a manifest must be a mapping (apiVersion: ..., kind: ...), not {describe(data)}"
            )
            self._report(name, document, None, None, [Issue((), problem)])
            return
        job_name, key = self._identity(data)
        version = version_of(data)
        if version is None:
            self._other_kind(name, document, job_name, key)
            return
        refused = refusals(data)
        problems = document.problems + [Issue(p.path, p.message) for p in refused]
        if not problems:
            # `status: {}` alone is no `kubectl get` output: read_manifest warns about it.
            checked = {k: v for k, v in data.items() if k != "status"}
            problems = _hinted(version, data, schema_problems(version.dialect, checked))
        job = None
        if not problems:
            try:
                job = read_manifest(
                    data,
                    version,
                    default_namespace=self.default_namespace,
                    source_path=name,
                    default_runtime=self.default_runtime,
                )
            except SpecError as error:
                problems = [Issue(p.path, p.message) for p in error.problems]
        if problems:
            self._report(name, document, job_name, key, problems)
            note = version.older_version_note()
            self._warn(name, document, job_name, [note] if note else [])
        elif job is not None:
            self._warn(name, document, job_name, list(job.warnings))
        held = job is not None and self._violates(name, document, job)
        if key is not None:
            line = document.line_of(("metadata", "name"))
            reason = refused[0].message.split(":")[0] if refused else ""
            self.named.append(Named(key, name, document.index, line, job, reason, held))

    def _violates(self, name: str, document: Document, job: MxJob) -> bool:
        """Report what the policy forbids in a valid job: `policy: ...` problems."""
        if self.policy is None:
            return False
        found = rules.violations(job, self.policy, self.default_namespace)
        if found:
            self.invalid.add((name, document.index))
        for violation in found:
            line = document.line_of(violation.path)
            message = f"policy: {violation.message}"
            self.problems.append(Problem(name, line, job.name, _field(violation.path), message))
        return bool(found)

    def _identity(self, data: Mapping[str, Any]) -> tuple[str | None, Key | None]:
        """The job's name and key, when the manifest says them plainly enough."""
        metadata = data.get("metadata")
        if not isinstance(metadata, dict):
            return None, None
        name, namespace = metadata.get("name"), metadata.get("namespace")
        if not isinstance(name, str) or not name:
            return None, None
        if not isinstance(namespace, str) or not namespace:
            namespace = self.default_namespace
        return name, (namespace, name)

    def _other_kind(
        self, name: str, document: Document, job_name: str | None, key: Key | None
    ) -> None:
        data = document.data
        kind, api_version = data.get("kind"), data.get("apiVersion")
        if isinstance(kind, str) and kind.lower() == "mxjob":
            by_api = {v.api_version: v for v in VERSIONS.values()}
            if isinstance(api_version, str) and api_version in by_api:
                where = "kind"
                message = f"apiVersion {api_version} takes kind {by_api[api_version].kind}"
            else:
                where = "apiVersion"
                message = f"apiVersion {api_version!r} with kind {kind!r} is not an MxJob dialect"
            message += (
                f": use apiVersion {KUBEFLOW_API_VERSION} with kind {KUBEFLOW_KIND}, or "
                f"apiVersion {SEED_API_VERSION} with kind {SEED_KIND} (also read: "
                + ", ".join(f"{v.api_version} {v.kind}" for v in VERSIONS.values() if not v.current)
                + ")"
            )
            self._report(name, document, job_name, key, [Issue((where,), message)])
            if key is not None:
                line = document.line_of(("metadata", "name"))
                refused = f"{api_version} {kind} is not an MxJob dialect"
                self.named.append(Named(key, name, document.index, line, None, refused))
            return
        self.ignored.append(
            Ignored(
                name,
                document.line,
                api_version if isinstance(api_version, str) else None,
                kind if isinstance(kind, str) else None,
                job_name,
            )
        )

    def _report(
        self,
        name: str,
        document: Document,
        job_name: str | None,
        key: Key | None,
        problems: list[Issue],
    ) -> None:
        self.invalid.add((name, document.index))
        if key is None:
            self.unnamed_invalid += 1
        for issue in problems:
            line = document.line_for(issue)
            self.problems.append(Problem(name, line, job_name, _field(issue.path), issue.message))

    def _warn(
        self, name: str, document: Document, job_name: str | None, found: list[FieldProblem]
    ) -> None:
        for warning in found:
            line = document.line_of(warning.path)
            self.warnings.append(
                Problem(name, line, job_name, _field(warning.path), warning.message, warning=True)
            )

    def _file_problem(self, problem: Problem) -> None:
        self.invalid.add((problem.file, -1))
        self.unnamed_invalid += 1
        self.problems.append(problem)

    def result(self) -> LoadResult:
        by_key: dict[Key, list[Named]] = defaultdict(list)
        for entry in self.named:
            by_key[entry.key].append(entry)
        jobs: list[MxJob] = []
        held: list[MxJob] = []
        invalid_keys: set[Key] = set()
        for key, entries in by_key.items():
            if len(entries) == 1 and entries[0].job is not None:
                (held if entries[0].held else jobs).append(entries[0].job)
                continue
            invalid_keys.add(key)
            for entry in entries if len(entries) > 1 else []:
                others = ", ".join(
                    f"{o.file}:{o.line}" + (f", which is refused: {o.refused}" if o.refused else "")
                    for o in entries
                    if o is not entry
                )
                self.problems.append(
                    Problem(
                        entry.file,
                        entry.line,
                        key[1],
                        "metadata.name",
                        f"job {key[0]}/{key[1]} is defined more than once (also at {others})",
                    )
                )
                self.invalid.add((entry.file, entry.index))
        return LoadResult(
            jobs=sorted(jobs, key=lambda job: job.key),
            problems=sorted(self.problems, key=_order),
            warnings=sorted(self.warnings, key=_order),
            ignored=self.ignored,
            invalid_keys=frozenset(invalid_keys),
            invalid_manifests=len(self.invalid),
            unnamed_invalid=self.unnamed_invalid,
            held=sorted(held, key=lambda job: job.key),
        )


def _order(problem: Problem) -> tuple[str, int, str, str]:
    return (problem.file, problem.line, problem.field, problem.message)


def _hinted(version: Version, data: Mapping[str, Any], problems: list[Issue]) -> list[Issue]:
    """Schema problems, with the version's hint for a field it has not (a later version's),
    and one where the manifest mixes the list and map forms."""
    hints = version.unknown_field_hints
    problems = [
        Issue(i.at, hints[i.at], i.at) if isinstance(i.at, tuple) and i.at in hints else i
        for i in problems
    ]
    spec = data.get("spec")
    if version.replicas_field != "mxReplicaSpecs" or not isinstance(spec, Mapping):
        return problems
    if not isinstance(spec.get("replicaSpecs"), list):
        return problems
    hint = (
        'unknown field "replicaSpecs": a list of replica specs is the seed dialect\'s form '
        f"(apiVersion {SEED_API_VERSION}, kind {SEED_KIND}); {version.api_version} "
        "takes mxReplicaSpecs, a map of Scheduler, Server and Worker"
    )
    return [Issue(i.path, hint, i.at) if i.at == ("spec", "replicaSpecs") else i for i in problems]


def _field(path: FieldPath) -> str:
    return format_path(tuple(path)) if path else ""
