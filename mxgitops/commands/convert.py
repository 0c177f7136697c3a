"""`mxgitops convert FILE...`: rewrite manifests in kubeflow.org/v1 (or the seed dialect).

A manifest of any version is read into the one `MxJob` exactly as `validate`
reads it, and written back in the target version: the conversion goes through
the model, so what the converted manifest runs is what the original ran, and
each document says whether its spec hash (the job's identity on the cluster)
stays the same or a sync would replace the job.

Files are edited with ruamel.yaml's round-trip mode, so comments, key order and
quoting survive wherever a node survives: the top of the document, metadata and
every pod template (their nodes are moved, not rebuilt). The spec around them is
rebuilt through the model, and its comments move with their fields
(`mxgitops.manifests.yamlcomments`): on the spec's keys, the run policy (inline or nested,
under any spelling), each replica spec and its fields; a comment on a field the
target has no place for (a v1beta1 `label`, a v1alpha1 `mxImage`) goes with the
field. What a version cannot express is refused with the reason, never dropped:
the seed dialect has no run policy, success policy, ExitCode restart policy or
scheduling policy.
`kubectl get` output is cleaned (status and server-set metadata go).

What runs is what validate and sync read, so the job is read as they read it:
YAML 1.1 (PyYAML; `010` is 8), within their bounds (an alias bomb is refused
before ruamel expands anything). ruamel's nodes only keep the layout. A pod
template written once and aliased (`&tpl` / `*tpl`) is one node shared by
several replicas: each replica gets a copy of its own before it is edited. And
every result is proved before anything is written: the converted text, read
back as validate reads it, must render the very objects the original renders
(the runtime's names aside); where the spec hash changes, what changes in them
is said, field by field; anything else is refused.
"""

from __future__ import annotations

import copy
import io
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from mxgitops.commands.convertcheck import as_validate_reads, cleaned, job_of, prove
from mxgitops.commands.convertcomments import dropped
from mxgitops.errors import ManifestError
from mxgitops.manifests.dialects import VERSIONS, version_of
from mxgitops.manifests.files import manifest_files
from mxgitops.manifests.spec import dump_fields
from mxgitops.manifests.yamlcomments import Comments, plain, written_key
from mxgitops.model import (
    DEFAULT_PS_ROOT_PORT,
    KUBEFLOW_PORT_NAME,
    SUCCESS_POLICY_ANNOTATION,
    CleanPodPolicy,
    Dialect,
    MxJob,
    ReplicaType,
    RestartPolicy,
    RunPolicy,
    SuccessPolicy,
)

TARGETS = {"kubeflow": Dialect.KUBEFLOW, "seed": Dialect.SEED}
# The modeline of the YAML language server (editors): `# yaml-language-server: $schema=URL`.
_MODELINE = re.compile(r"^(#\s*yaml-language-server:\s*\$schema=)(\S+)[ \t]*(?:\n|$)", re.MULTILINE)
_SCHEMA_FILES = frozenset(version.schema_file for version in VERSIONS.values())
# Each run-policy field as kubeflow.org/v1 writes it, then the spellings older versions
# wrote inline in `spec` (where its comments are found).
_RUN_POLICY_NAMES = {
    "clean_pod_policy": ("cleanPodPolicy", "cleanupPodPolicy"),
    "ttl_seconds_after_finished": ("ttlSecondsAfterFinished", "ttlSecondsAfterFinishing"),
    "active_deadline_seconds": ("activeDeadlineSeconds",),
    "backoff_limit": ("backoffLimit",),
    "suspend": ("suspend",),
}


@dataclass(frozen=True)
class ConvertedJob:
    name: str
    source: Dialect
    same_spec: bool  # the converted manifest gives the same spec hash (no replace on sync)
    changes: tuple[str, ...] = ()  # what the rendered objects change, where the spec does
    unchanged: bool = False  # already in the target version: left as it was


@dataclass(frozen=True)
class Converted:
    file: str
    text: str  # the whole file, converted
    jobs: list[ConvertedJob] = field(default_factory=list)
    schema_comment: str = ""  # what became of the editor's schema comment, if anything
    dropped: tuple[str, ...] = ()  # comments that had no place left: `LINE: # text`

    @property
    def rewritten(self) -> bool:
        """Whether a job of the file was converted (else its text is the file's own)."""
        return any(not job.unchanged for job in self.jobs)

    def describe(self, target: Dialect) -> list[str]:
        """One line per converted job, then one per comment dropped, for people."""
        said = [f"{self.file}: {self.schema_comment}"] if self.schema_comment else []
        return (
            said
            + [
                f"{self.file}: job {job.name}: already {target}, nothing changed"
                if job.unchanged
                else f"{self.file}: job {job.name}: {job.source} -> {target}"
                + (
                    ""
                    if job.same_spec
                    else " (the spec changes: a sync replaces this job once; see the diff"
                    + (f"; in its objects: {', '.join(job.changes)}" if job.changes else "")
                    + ")"
                )
                for job in self.jobs
            ]
            + [
                f"{self.file}:{line}: comment dropped (its field has no place in {target}):{text}"
                for line, _, text in (entry.partition(":") for entry in self.dropped)
            ]
        )


def convert_files(paths: Iterable[Path], target: Dialect) -> list[Converted]:
    """Every file converted (nothing written); ManifestError if one cannot be. A
    directory is read as validate reads it (its manifest files, hidden ones skipped),
    and only its files holding a job are converted: the others are left as they are."""
    converted = []
    for path in paths:
        if not path.is_dir():
            converted.append(_convert_file(path, target))
            continue
        files, problems = manifest_files(path)
        if problems:
            raise ManifestError("; ".join(f"{path / p.file}: {p.message}" for p in problems))
        found = [_convert_file(path / name, target) for name, _ in files]
        converted += [result for result in found if result.jobs]
    return converted


def _convert_file(path: Path, target: Dialect) -> Converted:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ManifestError(f"{path}: cannot read: {error}") from error
    return convert_text(text, target, name=str(path))


def write(converted: Iterable[Converted]) -> None:
    """Rewrite each file in place (after every file converted: all or nothing is written).
    A symlink is written through only to a file inside its checkout: a pull request's
    link must not make whoever converts its files rewrite one of theirs elsewhere."""
    results = list(converted)
    for result in results:
        _check_link(Path(result.file))
    for result in results:
        if result.rewritten:  # a file already in the target version is not touched
            Path(result.file).write_text(result.text, encoding="utf-8")


def _check_link(path: Path) -> None:
    """ManifestError if `path` is a symlink to a file outside its checkout: the nearest
    directory above it holding `.git` (without one, the current directory)."""
    if not path.is_symlink():
        return
    checkout = next(
        (d for d in path.absolute().parents if (d / ".git").exists()), Path.cwd()
    ).resolve()
    target = Path(os.path.realpath(path))
    if not target.is_relative_to(checkout):
        raise ManifestError(
            f"{path}: a symlink to {target}, outside the checkout {checkout}; nothing written"
        )


def render(converted: Sequence[Converted]) -> str:
    """The converted files as one YAML stream, for stdout."""
    return "---\n".join(result.text for result in converted)


def convert_text(text: str, target: Dialect, *, name: str = "<text>") -> Converted:
    read = as_validate_reads(text, name)  # first: within validate's bounds
    yaml = _yaml()
    try:
        nodes = list(yaml.load_all(text))
    except YAMLError as error:
        raise ManifestError(f"{name}: not YAML: {error}") from error
    jobs = []
    for document, data in zip(nodes, read, strict=True):
        if not isinstance(document, CommentedMap) or (version := version_of(data)) is None:
            continue
        if version is VERSIONS[target] and cleaned(data) == data:  # no `kubectl get` output
            jobs.append(ConvertedJob(job_of(data, name).name, target, True, unchanged=True))
        else:
            jobs.append(_convert_document(document, data, target, name))
    if not any(not job.unchanged for job in jobs):
        return Converted(name, text, jobs)  # byte for byte: nothing was converted
    out = io.StringIO()
    yaml.dump_all(nodes, out)
    converted = out.getvalue()
    if text.endswith("\n") and not converted.endswith("\n"):
        converted += "\n"  # ruamel ends a stream after a flow node's comment without one
    said = ""
    if jobs:
        converted, said = _schema_comment(converted, target)
    proved = prove(text, converted, name=name)
    jobs = [
        replace(job, changes=proved.get(job.name, ())) if not job.unchanged else job for job in jobs
    ]
    lost = dropped(text, converted, ignore=frozenset({"# yaml-language-server:"}))
    return Converted(name, converted, jobs, said, tuple(lost))


def _schema_comment(text: str, target: Dialect) -> tuple[str, str]:
    """The editor's `# yaml-language-server: $schema=...` comment of a converted file
    made to name the target's schema, and what was done: one of mxgitops' schemas is
    swapped for the target's, in the same place; any other (a schema of the version the
    file no longer has) is dropped, so that the editor checks nothing against it."""
    wanted = VERSIONS[target].schema_file
    said = ""

    def point(match: re.Match[str]) -> str:
        nonlocal said
        where, _, schema = match.group(2).rpartition("/")
        if schema in _SCHEMA_FILES:
            said = f"the editor's schema comment now names {wanted}"
            return f"{match.group(1)}{where}{'/' if where else ''}{wanted}\n"
        said = f"the editor's schema comment was dropped: it named {match.group(2)}, not {wanted}"
        return ""

    return _MODELINE.sub(point, text), said


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long line
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _convert_document(
    doc: CommentedMap, manifest: dict[str, Any], target: Dialect, name: str
) -> ConvertedJob:
    """`doc` (ruamel's nodes) rewritten in `target`, from `manifest` (the same document
    as validate reads it, which decides every value)."""
    _clean_dump(doc)
    job = job_of(cleaned(manifest), name)
    if target is Dialect.SEED:
        _refuse_for_seed(job, manifest, name)
    version = VERSIONS[target]
    doc["apiVersion"] = version.api_version
    doc["kind"] = version.kind
    metadata = doc.get("metadata")
    if isinstance(metadata, CommentedMap):
        annotations = metadata.get("annotations")
        if isinstance(annotations, CommentedMap):
            annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if target is not Dialect.SEED:
        _success_policy_annotation(doc, job)
    old_spec = doc["spec"]
    comments = Comments()
    comments.take(doc, old_spec)
    doc["spec"] = (
        _seed_spec(job, old_spec, comments)
        if target is Dialect.SEED
        else _kubeflow_spec(job, old_spec, comments)
    )
    comments.give(doc, doc["spec"])
    converted = job_of(as_validate_reads(_dumped(doc), name)[0], name)
    return ConvertedJob(job.name, job.dialect, converted.spec_hash == job.spec_hash)


def _success_policy_annotation(doc: CommentedMap, job: MxJob) -> None:
    """kubeflow.org/v1 has no successPolicy field: a job's other than the default is
    said by mxgitops' annotation (`model.SUCCESS_POLICY_ANNOTATION`)."""
    if job.success_policy is SuccessPolicy.SCHEDULER:
        return
    metadata = doc.setdefault("metadata", CommentedMap())
    annotations = metadata.get("annotations")
    if not isinstance(annotations, CommentedMap):
        annotations = metadata["annotations"] = CommentedMap()
    annotations[SUCCESS_POLICY_ANNOTATION] = job.success_policy.value


def _dumped(doc: CommentedMap) -> str:
    out = io.StringIO()
    _yaml().dump(doc, out)
    return out.getvalue()


def _clean_dump(doc: CommentedMap) -> None:
    """What `kubectl get` adds goes: status, and the metadata the server sets."""
    for dump_field in dump_fields(plain(doc)):
        if dump_field == "status":
            del doc["status"]
        else:
            del doc["metadata"][dump_field.removeprefix("metadata.")]
    if doc.get("status") == {}:
        del doc["status"]


def _refuse_for_seed(job: MxJob, manifest: Mapping[str, Any], name: str) -> None:
    lost = []
    if job.run_policy != RunPolicy():
        lost.append("a run policy")
    if job.success_policy is not SuccessPolicy.SCHEDULER:
        lost.append(f"successPolicy {job.success_policy}")
    if any(r.restart_policy is RestartPolicy.EXIT_CODE for r in job.replica_specs):
        lost.append("restartPolicy ExitCode")
    spec = manifest.get("spec") or {}
    if spec.get("schedulingPolicy") or (spec.get("runPolicy") or {}).get("schedulingPolicy"):
        lost.append("a scheduling policy")
    if lost:
        raise ManifestError(
            f"{name}: job {job.name} has {', '.join(lost)}, which the seed dialect cannot "
            "express: convert it to kubeflow.org/v1 instead"
        )


def _node(root: Any, path: Sequence[str | int]) -> Any:
    """The ruamel node at a field path, by the model's spelling (older ones matched too)."""
    node = root
    for part in path:
        node = node[written_key(node, part)]
    return node


def _template(
    doc_spec: Any, replica_path: Sequence[str | int], wanted: Mapping[str, Any], seen: _Seen
) -> Any:
    """The replica's template node, made equal to what the model runs, comments kept."""
    relative = list(replica_path[1:])  # ("spec", ...) -> within spec
    try:
        node = _node(doc_spec, [*relative, "template"])
    except (KeyError, IndexError, TypeError):
        return plain(wanted)
    return _update(node, wanted, seen)


_Seen = dict[int, Any]  # id of a node already made into a value -> that value


def _update(node: Any, wanted: Any, seen: _Seen) -> Any:
    """`node` changed in place into `wanted`, keeping the nodes (and comments) that stay.

    A node met again (an alias, `*tpl`, shares it between replicas) stays shared while
    both want the same; else the second gets a copy of its own: edited in place, it
    gave every replica the last one's edits."""
    if isinstance(node, CommentedMap | CommentedSeq):
        if id(node) in seen:
            if seen[id(node)] == wanted:
                return node
            node = _unaliased(copy.deepcopy(node))
        seen[id(node)] = wanted
    if isinstance(node, CommentedMap) and isinstance(wanted, Mapping):
        for key in [k for k in node if k not in wanted]:
            del node[key]
        for key, value in wanted.items():
            node[key] = _update(node[key], value, seen) if key in node else value
        return node
    if isinstance(node, CommentedSeq) and isinstance(wanted, list) and len(node) == len(wanted):
        for index, value in enumerate(wanted):
            node[index] = _update(node[index], value, seen)
        return node
    return node if plain(node) == wanted else wanted


def _unaliased(node: Any) -> Any:
    """`node` and what it holds without anchors: the copy is written out in full."""
    if isinstance(node, CommentedMap | CommentedSeq):
        node.anchor.value = None
        for child in node.values() if isinstance(node, CommentedMap) else node:
            _unaliased(child)
    return node


def _kubeflow_spec(job: MxJob, old_spec: Any, comments: Comments) -> CommentedMap:
    spec = CommentedMap()
    spec["jobMode"] = "MXTrain"
    comments.carry(spec, "jobMode", (old_spec, "jobMode"))
    old_policy = old_spec.get("runPolicy") or CommentedMap()
    run_policy = CommentedMap()
    for attribute, spellings in _RUN_POLICY_NAMES.items():
        value = getattr(job.run_policy, attribute)
        if value is not None and value is not False:
            written = spellings[0]
            run_policy[written] = value.value if isinstance(value, CleanPodPolicy) else value
            places = [(old, name) for old in (old_policy, old_spec) for name in spellings]
            comments.carry(run_policy, written, *places)
    scheduling = old_policy.get("schedulingPolicy") or old_spec.get("schedulingPolicy")
    if scheduling:
        run_policy["schedulingPolicy"] = scheduling  # the node itself: its comments stay
        places = [(old_policy, "schedulingPolicy"), (old_spec, "schedulingPolicy")]
        comments.carry(run_policy, "schedulingPolicy", *places)
    if run_policy:
        spec["runPolicy"] = run_policy
        comments.carry(spec, "runPolicy", (old_spec, "runPolicy"))
    replicas = CommentedMap()
    seen: _Seen = {}
    for replica in job.replica_specs:
        wanted = dict(replica.template)
        priority = plain(scheduling or {}).get("priorityClass")
        wanted = _without_injected(wanted, "priorityClassName", priority, old_spec, replica.path)
        if replica.type is ReplicaType.SCHEDULER and replica.ps_root_port != DEFAULT_PS_ROOT_PORT:
            wanted = _with_port(wanted, replica.ps_root_port)
        entry = CommentedMap()
        entry["replicas"] = replica.replicas
        entry["restartPolicy"] = replica.restart_policy.value
        entry["template"] = _template(old_spec, replica.path, wanted, seen)
        type_name = replica.type.value.title()
        replicas[type_name] = entry
        parent, key, old = _replica_nodes(old_spec, replica.path)
        comments.carry(replicas, type_name, (parent, key), (old, "mxReplicaType"))
        for name in entry:
            comments.carry(entry, name, (old, name))
    spec["mxReplicaSpecs"] = replicas
    places = [(old_spec, "mxReplicaSpecs"), (old_spec, "replicaSpecs")]
    comments.carry(spec, "mxReplicaSpecs", *places)
    return spec


def _replica_nodes(old_spec: Any, path: Sequence[str | int]) -> tuple[Any, Any, Any]:
    """The old replica spec's parent node, its key (or index) there, and the node."""
    parent = _node(old_spec, list(path[1:-1]))
    key = written_key(parent, path[-1])
    return parent, key, parent[key]


def _without_injected(
    template: dict[str, Any], key: str, value: Any, old_spec: Any, path: Sequence[str | int]
) -> dict[str, Any]:
    """The template without a field the conversion put there from a policy still written."""
    pod_spec = template.get("spec") or {}
    if value is None or pod_spec.get(key) != value:
        return template
    try:
        written = plain(_node(old_spec, [*path[1:], "template", "spec"]))
    except (KeyError, IndexError, TypeError):
        return template
    if key in written:
        return template
    return {**template, "spec": {k: v for k, v in pod_spec.items() if k != key}}


def _with_port(template: dict[str, Any], port: int) -> dict[str, Any]:
    """The scheduler's port, which Kubeflow reads from the mxnet container's `mxjob-port`."""
    pod_spec = dict(template.get("spec") or {})
    containers = [
        dict(c) if isinstance(c, Mapping) else c for c in pod_spec.get("containers") or []
    ]
    for container in containers:
        if isinstance(container, dict) and container.get("name") == "mxnet":
            ports = [p for p in container.get("ports") or [] if p.get("name") != KUBEFLOW_PORT_NAME]
            container["ports"] = [*ports, {"name": KUBEFLOW_PORT_NAME, "containerPort": port}]
    return {**template, "spec": {**pod_spec, "containers": containers}}


def _seed_spec(job: MxJob, old_spec: Any, comments: Comments) -> CommentedMap:
    spec = CommentedMap()
    spec["jobMode"] = job.mode.value
    comments.carry(spec, "jobMode", (old_spec, "jobMode"))
    replicas = CommentedSeq()
    seen: _Seen = {}
    for replica in job.replica_specs:
        wanted = dict(replica.template)
        pod_spec = wanted.get("spec") or {}
        if replica.restart_policy is not RestartPolicy(pod_spec.get("restartPolicy", "OnFailure")):
            wanted = {**wanted, "spec": {**pod_spec, "restartPolicy": replica.restart_policy.value}}
        entry = CommentedMap()
        entry["mxReplicaType"] = replica.type.value
        entry["replicas"] = replica.replicas
        if replica.ps_root_port != DEFAULT_PS_ROOT_PORT:
            entry["PsRootPort"] = replica.ps_root_port
        entry["template"] = _template(old_spec, replica.path, wanted, seen)
        parent, key, old = _replica_nodes(old_spec, replica.path)
        comments.carry(replicas, len(replicas), (parent, key))
        pod_spec_node = entry["template"].get("spec")
        if isinstance(pod_spec_node, CommentedMap):  # the replica's restart policy went here
            places = [(pod_spec_node, "restartPolicy"), (old, "restartPolicy")]
            comments.carry(pod_spec_node, "restartPolicy", *places)
        for name in entry:
            comments.carry(entry, name, (old, name))
        replicas.append(entry)
    spec["replicaSpecs"] = replicas
    places = [(old_spec, "replicaSpecs"), (old_spec, "mxReplicaSpecs")]
    comments.carry(spec, "replicaSpecs", *places)
    return spec
