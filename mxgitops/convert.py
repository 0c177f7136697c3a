"""`mxgitops convert FILE...`: rewrite manifests in kubeflow.org/v1 (or the seed dialect).

A manifest of any version is read into the one `MxJob` exactly as `validate`
reads it, and written back in the target version: the conversion goes through
the model, so what the converted manifest runs is what the original ran, and
each document says whether its spec hash (the job's identity on the cluster)
stays the same or a sync would replace the job.

Files are edited with ruamel.yaml's round-trip mode, so comments, key order and
quoting survive wherever a node survives: the top of the document, metadata and
every pod template (their nodes are moved, not rebuilt). The spec around them is
rebuilt through the model, and its comments move with their fields (`_Comments`):
on the spec's keys, the run policy (inline or nested, under any spelling), each
replica spec and its fields; a comment on a field the target has no place for
(a v1beta1 `label`, a v1alpha1 `mxImage`) goes with the field. What a version cannot
express is refused with the reason, never dropped: the seed dialect has no run
policy, success policy, ExitCode restart policy or scheduling policy.
`kubectl get` output is cleaned (status and server-set metadata go).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark, YAMLError
from ruamel.yaml.tokens import CommentToken

from mxgitops.dialects import VERSIONS, version_of
from mxgitops.errors import ManifestError
from mxgitops.schema import schema_problems
from mxgitops.spec import (
    DEFAULT_PS_ROOT_PORT,
    KUBEFLOW_PORT_NAME,
    CleanPodPolicy,
    Dialect,
    MxJob,
    ReplicaType,
    RestartPolicy,
    RunPolicy,
    SpecError,
    SuccessPolicy,
    dump_fields,
    format_path,
    from_manifest,
)

TARGETS = {"kubeflow": Dialect.KUBEFLOW, "seed": Dialect.SEED}
_RUN_POLICY_NAMES = {
    "clean_pod_policy": "cleanPodPolicy",
    "ttl_seconds_after_finished": "ttlSecondsAfterFinished",
    "active_deadline_seconds": "activeDeadlineSeconds",
    "backoff_limit": "backoffLimit",
    "suspend": "suspend",
}


@dataclass(frozen=True)
class ConvertedJob:
    name: str
    source: Dialect
    same_spec: bool  # the converted manifest gives the same spec hash (no replace on sync)


@dataclass(frozen=True)
class Converted:
    file: str
    text: str  # the whole file, converted
    jobs: list[ConvertedJob] = field(default_factory=list)

    def describe(self, target: Dialect) -> list[str]:
        """One line per converted job, for people."""
        return [
            f"{self.file}: job {job.name}: {job.source} -> {target}"
            + (
                ""
                if job.same_spec
                else " (the spec changes: a sync replaces this job once; see the diff)"
            )
            for job in self.jobs
        ]


def convert_files(paths: Iterable[Path], target: Dialect) -> list[Converted]:
    """Every file converted (nothing written); ManifestError if one cannot be."""
    converted = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ManifestError(f"{path}: cannot read: {error}") from error
        converted.append(convert_text(text, target, name=str(path)))
    return converted


def write(converted: Iterable[Converted]) -> None:
    """Rewrite each file in place (after every file converted: all or nothing is written)."""
    for result in converted:
        Path(result.file).write_text(result.text, encoding="utf-8")


def render(converted: Sequence[Converted]) -> str:
    """The converted files as one YAML stream, for stdout."""
    return "---\n".join(result.text for result in converted)


def convert_text(text: str, target: Dialect, *, name: str = "<text>") -> Converted:
    yaml = _yaml()
    try:
        documents = list(yaml.load_all(text))
    except YAMLError as error:
        raise ManifestError(f"{name}: not YAML: {error}") from error
    jobs = []
    for document in documents:
        if isinstance(document, CommentedMap) and version_of(_plain(document)) is not None:
            jobs.append(_convert_document(document, target, name))
    out = io.StringIO()
    yaml.dump_all(documents, out)
    converted = out.getvalue()
    if text.endswith("\n") and not converted.endswith("\n"):
        converted += "\n"  # ruamel ends a stream after a flow node's comment without one
    return Converted(name, converted, jobs)


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long line
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _convert_document(doc: CommentedMap, target: Dialect, name: str) -> ConvertedJob:
    _clean_dump(doc)
    plain = _plain(doc)
    job = _job(plain, name)
    if target is Dialect.SEED:
        _refuse_for_seed(job, plain, name)
    version = VERSIONS[target]
    doc["apiVersion"] = version.api_version
    doc["kind"] = version.kind
    metadata = doc.get("metadata")
    if isinstance(metadata, CommentedMap):
        annotations = metadata.get("annotations")
        if isinstance(annotations, CommentedMap):
            annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    old_spec = doc["spec"]
    comments = _Comments()
    comments.take(doc, old_spec)
    doc["spec"] = (
        _seed_spec(job, old_spec, comments)
        if target is Dialect.SEED
        else _kubeflow_spec(job, old_spec, comments)
    )
    comments.give(doc, doc["spec"])
    converted = _job(_plain(doc), name)
    return ConvertedJob(job.name, job.dialect, converted.spec_hash == job.spec_hash)


def _clean_dump(doc: CommentedMap) -> None:
    """What `kubectl get` adds goes: status, and the metadata the server sets."""
    for dump_field in dump_fields(_plain(doc)):
        if dump_field == "status":
            del doc["status"]
        else:
            del doc["metadata"][dump_field.removeprefix("metadata.")]
    if doc.get("status") == {}:
        del doc["status"]


def _job(plain: dict[str, Any], name: str) -> MxJob:
    version = version_of(plain)
    assert version is not None
    problems = [(p.path, p.message) for p in schema_problems(version.dialect, plain)]
    if not problems:
        try:
            return from_manifest(plain)
        except SpecError as error:
            problems = [(p.path, p.message) for p in error.problems]
    job_name = (plain.get("metadata") or {}).get("name", "?")
    details = "; ".join(f"{format_path(tuple(path))}: {message}" for path, message in problems)
    raise ManifestError(
        f"{name}: job {job_name} is invalid, fix it first (mxgitops validate): {details}"
    )


def _refuse_for_seed(job: MxJob, plain: Mapping[str, Any], name: str) -> None:
    lost = []
    if job.run_policy != RunPolicy():
        lost.append("a run policy")
    if job.success_policy is not SuccessPolicy.SCHEDULER:
        lost.append(f"successPolicy {job.success_policy}")
    if any(r.restart_policy is RestartPolicy.EXIT_CODE for r in job.replica_specs):
        lost.append("restartPolicy ExitCode")
    spec = plain.get("spec") or {}
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
        if isinstance(node, Mapping) and isinstance(part, str) and part not in node:
            part = next((k for k in node if str(k).lower() == part.lower()), part)
        node = node[part]
    return node


def _template(doc_spec: Any, replica_path: Sequence[str | int], wanted: Mapping[str, Any]) -> Any:
    """The replica's template node, made equal to what the model runs, comments kept."""
    relative = list(replica_path[1:])  # ("spec", ...) -> within spec
    try:
        node = _node(doc_spec, [*relative, "template"])
    except (KeyError, IndexError, TypeError):
        return _plain(wanted)
    return _update(node, wanted)


def _update(node: Any, wanted: Any) -> Any:
    """`node` changed in place into `wanted`, keeping the nodes (and comments) that stay."""
    if isinstance(node, CommentedMap) and isinstance(wanted, Mapping):
        for key in [k for k in node if k not in wanted]:
            del node[key]
        for key, value in wanted.items():
            node[key] = _update(node[key], value) if key in node else value
        return node
    if isinstance(node, CommentedSeq) and isinstance(wanted, list) and len(node) == len(wanted):
        for index, value in enumerate(wanted):
            node[index] = _update(node[index], value)
        return node
    return node if _plain(node) == wanted else wanted


def _kubeflow_spec(job: MxJob, old_spec: Any, comments: _Comments) -> CommentedMap:
    spec = CommentedMap()
    spec["jobMode"] = "MXTrain"
    comments.carry(spec, "jobMode", (old_spec, "jobMode"))
    if job.success_policy is not SuccessPolicy.SCHEDULER:
        spec["successPolicy"] = job.success_policy.value
        comments.carry(spec, "successPolicy", (old_spec, "successPolicy"))
    old_policy = old_spec.get("runPolicy") or CommentedMap()
    run_policy = CommentedMap()
    for attribute, written in _RUN_POLICY_NAMES.items():
        value = getattr(job.run_policy, attribute)
        if value is not None and value is not False:
            run_policy[written] = value.value if isinstance(value, CleanPodPolicy) else value
            spellings = _RUN_POLICY_SPELLINGS[written]
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
    for replica in job.replica_specs:
        wanted = dict(replica.template)
        priority = _plain(scheduling or {}).get("priorityClass")
        wanted = _without_injected(wanted, "priorityClassName", priority, old_spec, replica.path)
        if replica.type is ReplicaType.SCHEDULER and replica.ps_root_port != DEFAULT_PS_ROOT_PORT:
            wanted = _with_port(wanted, replica.ps_root_port)
        entry = CommentedMap()
        entry["replicas"] = replica.replicas
        entry["restartPolicy"] = replica.restart_policy.value
        entry["template"] = _template(old_spec, replica.path, wanted)
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
    key = path[-1]
    if isinstance(parent, Mapping) and key not in parent:
        key = next((k for k in parent if str(k).lower() == str(key).lower()), key)
    return parent, key, parent[key]


def _without_injected(
    template: dict[str, Any], key: str, value: Any, old_spec: Any, path: Sequence[str | int]
) -> dict[str, Any]:
    """The template without a field the conversion put there from a policy still written."""
    pod_spec = template.get("spec") or {}
    if value is None or pod_spec.get(key) != value:
        return template
    try:
        written = _plain(_node(old_spec, [*path[1:], "template", "spec"]))
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


def _seed_spec(job: MxJob, old_spec: Any, comments: _Comments) -> CommentedMap:
    spec = CommentedMap()
    spec["jobMode"] = job.mode.value
    comments.carry(spec, "jobMode", (old_spec, "jobMode"))
    replicas = CommentedSeq()
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
        entry["template"] = _template(old_spec, replica.path, wanted)
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


def _plain(node: Any) -> Any:
    """ruamel's round-trip types as plain JSON values (what the schemas and rules read)."""
    if isinstance(node, Mapping):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return str(node)


# Each run-policy field as kubeflow.org/v1 writes it, and the spellings older versions
# wrote inline in `spec`, where its comments are found.
_RUN_POLICY_SPELLINGS = {
    "cleanPodPolicy": ("cleanPodPolicy", "cleanupPodPolicy"),
    "ttlSecondsAfterFinished": ("ttlSecondsAfterFinished", "ttlSecondsAfterFinishing"),
    "activeDeadlineSeconds": ("activeDeadlineSeconds",),
    "backoffLimit": ("backoffLimit",),
    "suspend": ("suspend",),
}
_Place = tuple[int, Any]  # (id of a mapping or sequence, its key or index)
_Holder = tuple[Any, Any, int]  # (mapping or sequence, key or index, comment slot)


@dataclass
class _Notes:
    """The comments of one field: the whole lines above it, the one ending its line."""

    before: list[str] = field(default_factory=list)  # stripped; "" is a blank line
    eol: str | None = None
    offset: int | None = None  # the eol comment's column, from the field's
    width: int | None = None  # the field's line as written, from its column
    gap: int = 2  # spaces between the field's line and its eol comment


class _Comments:
    """A spec's comments by field, so that the spec rebuilt in another version carries
    each comment to the converted field.

    ruamel.yaml keeps a comment in the token before it: a field's end-of-line
    comment and the whole lines below it (written above the *next* field) are one
    token. `take` reads the old spec in document order, gives every field its own
    notes and strips the tokens; `give` walks the new spec in document order and
    writes the notes back at each field's new place and indentation. A rebuilt
    field names the old fields it comes from with `carry`; a node moved as it is
    (a pod template, a scheduling policy) keeps its own. Comments on a field the
    target version has no place for go with that field.
    """

    def __init__(self) -> None:
        self.notes: dict[_Place, _Notes] = {}
        self.sources: dict[_Place, list[_Place]] = {}
        self.first_eol: dict[_Place, _Notes] = {}  # a sequence item's, for its first key
        self.trailing: list[str] = []  # lines after the spec's last field, as written
        self._alive: dict[int, Any] = {}  # the old nodes, so that no new node takes an id
        self._given: set[int] = set()

    def take(self, doc: CommentedMap, spec: Any) -> None:
        slots = doc.ca.items.get("spec")
        token = slots[2] if slots else None
        pending: list[str] = []
        if token is not None:
            first, _, rest = str(token.value).partition("\n")
            pending = rest.split("\n")[:-1]
            if first.strip():
                token.value = first + "\n"
            else:
                slots[2] = None
        self.trailing = self._take(spec, pending)

    def carry(self, new: Any, key: Any, *sources: tuple[Any, Any]) -> None:
        """The field `new[key]` takes the comments of the old fields `sources`."""
        places = []
        for container, old_key in sources:
            if isinstance(container, CommentedMap) and old_key not in container:
                folded = str(old_key).lower()
                old_key = next((k for k in container if str(k).lower() == folded), None)
            if old_key is not None and _block(container):
                places.append((id(container), old_key))
        self.sources[(id(new), key)] = places

    def give(self, doc: CommentedMap, spec: Any) -> None:
        if _block(spec):
            holder = self._give(spec, 2, (doc, "spec", 2))
            _append(holder, [line.rstrip() for line in self.trailing])

    def _take(self, node: Any, pending: list[str]) -> list[str]:
        if _ruamel(node) and not _block(node) and node.ca.comment is not None:
            node.ca.comment[0] = None  # a flow node's copy of its field's eol token
        if not _block(node) or id(node) in self._alive:
            return pending  # an alias is written (and commented) where its anchor is
        self._alive[id(node)] = node
        if node.ca.comment is not None:
            for token in node.ca.comment[1] or []:
                pending = pending + _lines(token)
            node.ca.comment = None
        is_map = isinstance(node, CommentedMap)
        for key in list(node) if is_map else range(len(node)):
            slots = node.ca.items.pop(key, None) or [None, None, None, None]
            notes = _Notes(before=[line.strip() for line in pending])
            for token in slots[1] or []:
                notes.before += [line.strip() for line in _lines(token)]
            self.notes[(id(node), key)] = notes
            pending = []
            token = slots[2 if is_map else 0]
            if token is not None:
                first, _, rest = str(token.value).partition("\n")
                pending = rest.split("\n")[:-1]
                column = _column(node, key)
                if first.strip():
                    notes.eol = first.strip()
                    if column is not None:
                        end = _line_end(column, key if is_map else None, node[key])
                        notes.offset = token.start_mark.column - column
                        notes.width = end - column
                        notes.gap = max(1, token.start_mark.column - end)
            pending = self._take(node[key], pending)
        return pending

    def _notes(self, container: Any, key: Any) -> _Notes:
        """The notes a new field carries (each old field's are given once)."""
        place = (id(container), key)
        merged = _Notes()
        for source in self.sources.get(place, [place]):
            notes = self.notes.pop(source, None)
            if notes is not None and merged.eol is None and notes.eol is not None:
                merged = replace(notes, before=merged.before + notes.before)
            elif notes is not None:
                merged.before += notes.before
        spare = self.first_eol.pop(place, None)
        if merged.eol is None and spare is not None:
            merged = replace(spare, before=merged.before)
        return merged

    def _give(self, node: Any, column: int, holder: _Holder) -> _Holder:
        """Write the notes of `node`'s fields (keys at `column`); the last holder."""
        if id(node) in self._given:
            return holder
        self._given.add(id(node))
        is_map = isinstance(node, CommentedMap)
        for key in list(node) if is_map else range(len(node)):
            value = node[key]
            if value and isinstance(value, (dict, list)) and not _ruamel(value):
                value = node[key] = _commented(value)  # plain: from the model
            notes = self._notes(node, key)
            if not is_map and isinstance(value, CommentedMap) and _block(value):
                self.first_eol[(id(value), next(iter(value)))] = notes  # "- key: x  # eol"
                notes = _Notes(before=notes.before)
            indent = " " * (column if is_map else column - 2)
            _append(holder, [indent + line if line else "" for line in notes.before])
            if notes.eol is not None:
                end = _line_end(column, key if is_map else None, value)
                at = end + notes.gap  # after the field, as far as it was
                if notes.offset is not None and end - column == notes.width:
                    at = column + notes.offset  # an unchanged line keeps its comment's column
                slots = node.ca.items.setdefault(key, [None, None, None, None])
                slots[2 if is_map else 0] = CommentToken(notes.eol + "\n", CommentMark(at))
            holder = (node, key, 2 if is_map else 0)
            if _block(value):
                nested = 0 if isinstance(value, CommentedMap) else 2  # "- " before each item
                inner = column + nested + (2 if is_map else 0)
                holder = self._give(value, inner, holder)
        return holder


def _block(node: Any) -> bool:
    """A non-empty mapping or sequence written in block style (comments live there)."""
    return _ruamel(node) and len(node) > 0 and node.fa.flow_style() is not True


def _ruamel(node: Any) -> bool:
    return isinstance(node, (CommentedMap, CommentedSeq))


def _commented(value: Any) -> Any:
    """Plain mappings and sequences as ruamel's, which can carry comments."""
    if isinstance(value, Mapping):
        result = CommentedMap()
        for key, item in value.items():
            result[key] = _commented(item)
        return result
    if isinstance(value, list):
        return CommentedSeq(_commented(item) for item in value)
    return value


def _lines(token: Any) -> list[str]:
    """A comment token's lines, the first at the token's column."""
    lines = str(token.value).split("\n")[:-1] or [""]
    if lines[0]:
        lines[0] = " " * token.start_mark.column + lines[0]
    return lines


def _column(node: Any, key: Any) -> int | None:
    """The column a field was written at, if ruamel recorded it."""
    data = getattr(node.lc, "data", None) or {}
    position = data.get(key)
    return int(position[1]) if position else None


def _line_end(column: int, key: Any, value: Any) -> int:
    """Where a field's line ends: `key: value` (mapping) or `value` (sequence item)."""
    end = column if key is None else column + len(str(key)) + 1
    if _block(value):
        return end  # `key:`, the value on the lines below
    text = _plain(value)
    text = json.dumps(text) if not isinstance(text, str) else text
    quoted = 2 if type(value).__name__.endswith("QuotedScalarString") else 0
    return end + (1 if key is not None else 0) + len(text) + quoted


def _append(holder: _Holder, lines: list[str]) -> None:
    """Whole comment lines after the holder's line (before what comes next)."""
    if not lines:
        return
    container, key, slot = holder
    slots = container.ca.items.setdefault(key, [None, None, None, None])
    text = "".join(line + "\n" for line in lines)
    if slots[slot] is None:
        slots[slot] = CommentToken("\n" + text, CommentMark(0))
    else:
        slots[slot].value = str(slots[slot].value) + text
