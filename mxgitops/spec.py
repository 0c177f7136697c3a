"""The MxJob model: both manifest dialects normalised into one typed value.

A manifest arrives as a dict that already passed the JSON schema of its
dialect (see `manifests.py`), so types and unknown fields are settled. This
module turns it into an `MxJob`, applies the seed's defaults and checks the
rules a schema cannot express: job modes, the `mxnet` container, restart
policies, derived object names, reserved environment variables. Every problem
is reported with the field path it concerns, never as a traceback.

The model is what every later stage works on; the spec hash derived from it
decides whether a live job is unchanged or must be replaced.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any

from mxgitops.errors import ManifestError

NAMESPACE = "default"
SEED_API_VERSION = "mxnet.mlkube.io/v1beta1"
SEED_KIND = "MxJob"
KUBEFLOW_API_VERSION = "kubeflow.org/v1"
KUBEFLOW_KIND = "MXJob"

CONTAINER_NAME = "mxnet"
DEFAULT_PS_ROOT_PORT = 9091
KUBEFLOW_PORT_NAME = "mxjob-port"
ON_CHANGE_ANNOTATION = "mxgitops.io/on-change"
RESERVED_ENV_PREFIX = "DMLC_"
RESERVED_ENV_NAMES = frozenset({"MX_CONFIG"})

MAX_NAME_LENGTH = 63
# A bound on every replica count, checked (schema and model) before any work per
# replica: one object per replica index is derived, listed and planned.
MAX_REPLICAS = 10_000
# The seed drew 4 random characters. A runtime id is derived from the spec hash
# instead: the whole 256-bit hash reduced modulo 36**5, so every one of the
# 60,466,176 ids is equally likely and a changed spec keeps the old id (and
# names, which would defeat a replace) with a chance of 1 in 60,466,176.
RUNTIME_ID_LENGTH = 5

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

Path = tuple[str | int, ...]


class Dialect(StrEnum):
    SEED = SEED_API_VERSION
    KUBEFLOW = KUBEFLOW_API_VERSION


class ReplicaType(StrEnum):
    SCHEDULER = "SCHEDULER"
    SERVER = "SERVER"
    WORKER = "WORKER"

    @property
    def role(self) -> str:
        """The lower-case name used in object names and `DMLC_ROLE`."""
        return self.value.lower()


# Kubeflow spells the replica types in title case.
KUBEFLOW_REPLICA_TYPES = {t.value.title(): t for t in ReplicaType}


class JobMode(StrEnum):
    LOCAL = "local"
    DIST = "dist"


class RestartPolicy(StrEnum):
    ON_FAILURE = "OnFailure"
    NEVER = "Never"
    EXIT_CODE = "ExitCode"  # Kubeflow: Never plus a pod failure policy on exit codes


class CleanPodPolicy(StrEnum):
    ALL = "All"
    RUNNING = "Running"
    NONE = "None"


class OnChange(StrEnum):
    REPLACE = "replace"  # a changed spec replaces the job even while it runs
    WAIT = "wait"  # a changed or removed job waits until it has finished


class SuccessPolicy(StrEnum):
    SCHEDULER = ""  # the seed's rule: a dist job succeeds with its scheduler
    ALL_WORKERS = "AllWorkers"


@dataclass(frozen=True)
class FieldProblem:
    """One thing wrong with a manifest, at a field path such as spec.replicaSpecs[0]."""

    path: Path
    message: str

    @property
    def field_path(self) -> str:
        return format_path(self.path)


class SpecError(ManifestError):
    """A manifest breaks the model's rules; `problems` says where and why."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        super().__init__("; ".join(f"{p.field_path}: {p.message}" for p in problems))
        self.problems = problems


@dataclass(frozen=True)
class ReplicaSpec:
    type: ReplicaType
    replicas: int
    restart_policy: RestartPolicy
    template: Mapping[str, Any]  # a PodTemplateSpec, as written
    ps_root_port: int = DEFAULT_PS_ROOT_PORT
    path: Path = ()  # where it stands in the manifest, for error messages


@dataclass(frozen=True)
class RunPolicy:
    clean_pod_policy: CleanPodPolicy | None = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    suspend: bool = False


@dataclass(frozen=True)
class MxJob:
    name: str
    namespace: str
    mode: JobMode
    replica_specs: tuple[ReplicaSpec, ...]  # ordered SCHEDULER, SERVER, WORKER
    run_policy: RunPolicy = RunPolicy()
    success_policy: SuccessPolicy = SuccessPolicy.SCHEDULER
    on_change: OnChange = OnChange.REPLACE
    dialect: Dialect = Dialect.SEED
    source_path: str = field(default="", compare=False)

    def replica(self, replica_type: ReplicaType) -> ReplicaSpec | None:
        return next((r for r in self.replica_specs if r.type is replica_type), None)

    @property
    def key(self) -> tuple[str, str]:
        """What identifies a job across syncs: (namespace, name)."""
        return (self.namespace, self.name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; `from_dict` gives back an equal job."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MxJob:
        policy = data["run_policy"]
        clean = policy["clean_pod_policy"]
        return cls(
            name=data["name"],
            namespace=data["namespace"],
            mode=JobMode(data["mode"]),
            replica_specs=tuple(
                ReplicaSpec(
                    type=ReplicaType(r["type"]),
                    replicas=r["replicas"],
                    restart_policy=RestartPolicy(r["restart_policy"]),
                    template=r["template"],
                    ps_root_port=r["ps_root_port"],
                    path=tuple(r["path"]),
                )
                for r in data["replica_specs"]
            ),
            run_policy=RunPolicy(
                **{**policy, "clean_pod_policy": CleanPodPolicy(clean) if clean else None}
            ),
            success_policy=SuccessPolicy(data["success_policy"]),
            on_change=OnChange(data["on_change"]),
            dialect=Dialect(data["dialect"]),
            source_path=data["source_path"],
        )

    @cached_property
    def spec_hash(self) -> str:
        """sha256 of everything that shapes the job's objects.

        The dialect, the on-change annotation and the source path are left out:
        rewriting a manifest in the other dialect, or moving it, changes nothing.
        """
        return hashlib.sha256(_canonical_json(self).encode()).hexdigest()

    @cached_property
    def runtime_id(self) -> str:
        number = int(self.spec_hash, 16) % 36**RUNTIME_ID_LENGTH  # uniform, see above
        return _base36(number).rjust(RUNTIME_ID_LENGTH, "0")


def format_path(path: Path) -> str:
    """('spec', 'replicaSpecs', 0, 'template') -> 'spec.replicaSpecs[0].template'."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(document)"


def dialect_of(doc: Mapping[str, Any]) -> Dialect | None:
    """The dialect of a manifest, or None when it is not an MxJob at all."""
    kind = (doc.get("apiVersion"), doc.get("kind"))
    if kind == (SEED_API_VERSION, SEED_KIND):
        return Dialect.SEED
    if kind == (KUBEFLOW_API_VERSION, KUBEFLOW_KIND):
        return Dialect.KUBEFLOW
    return None


def refusals(doc: Mapping[str, Any]) -> list[FieldProblem]:
    """Problems that make every other check pointless (checked before the schema)."""
    spec = doc.get("spec")
    if isinstance(spec, Mapping) and spec.get("jobMode") == "MXTune":
        return [
            FieldProblem(
                ("spec", "jobMode"),
                "jobMode MXTune is not supported: mxgitops runs training jobs only "
                "(jobMode MXTrain)",
            )
        ]
    return []


def from_manifest(doc: Mapping[str, Any], *, default_namespace: str = NAMESPACE) -> MxJob:
    """Normalise a schema-valid manifest of either dialect; raise SpecError on rule breaks."""
    dialect = dialect_of(doc)
    if dialect is None:
        raise SpecError([FieldProblem(("kind",), "not an MxJob manifest")])
    problems = refusals(doc)
    if problems:
        raise SpecError(problems)
    metadata: Mapping[str, Any] = doc.get("metadata") or {}
    spec: Mapping[str, Any] = doc.get("spec") or {}
    if dialect is Dialect.SEED:
        replicas, problems = _seed_replicas(spec)
        run_policy = RunPolicy()
    else:
        replicas, problems = _kubeflow_replicas(spec)
        run_policy, policy_problems = _run_policy(spec)
        problems += policy_problems
    on_change, on_change_problems = _on_change(metadata)
    job = MxJob(
        name=str(metadata.get("name", "")),
        namespace=str(metadata.get("namespace") or default_namespace),
        mode=_job_mode(spec, replicas),
        replica_specs=tuple(sorted(replicas, key=lambda r: list(ReplicaType).index(r.type))),
        run_policy=run_policy,
        success_policy=SuccessPolicy(spec.get("successPolicy", "")),
        on_change=on_change,
        dialect=dialect,
    )
    problems += on_change_problems
    if any(r.replicas > MAX_REPLICAS for r in job.replica_specs):
        raise SpecError(problems)  # counted already; the rules below work per replica
    problems += _semantic_problems(job)
    if problems:
        raise SpecError(problems)
    return job


def derived_names(job: MxJob) -> Iterator[tuple[Path, str]]:
    """Every object name a job renders to, with the replica spec that causes it.

    One batch Job per replica index: `{job}-{type}-{runtimeId}-{index}`; the
    scheduler's Service shares the name of the scheduler's Job.
    """
    for replica in job.replica_specs:
        for index in range(replica.replicas):
            yield replica.path, job_object_name(job, replica.type, index)


def job_object_name(job: MxJob, replica_type: ReplicaType, index: int) -> str:
    return f"{job.name}-{replica_type.role}-{job.runtime_id}-{index}"


def scheduler_service_name(job: MxJob) -> str:
    return job_object_name(job, ReplicaType.SCHEDULER, 0)


def mxnet_container(template: Mapping[str, Any]) -> Mapping[str, Any] | None:
    containers = (template.get("spec") or {}).get("containers") or []
    return next((c for c in _mappings(containers) if c.get("name") == CONTAINER_NAME), None)


def is_dns1123_label(value: str, max_length: int = MAX_NAME_LENGTH) -> bool:
    """Lower-case letters, digits and '-', starting and ending with a letter or digit."""
    return len(value) <= max_length and _DNS1123_LABEL.match(value) is not None


def is_reserved_env(name: str) -> bool:
    return name.startswith(RESERVED_ENV_PREFIX) or name in RESERVED_ENV_NAMES


def _mappings(items: Any) -> Iterator[Mapping[str, Any]]:
    """The mapping items of a list; Kubernetes' schema lets list items be null."""
    return (item for item in items if isinstance(item, Mapping))


# -- dialects ---------------------------------------------------------------


def _seed_replicas(spec: Mapping[str, Any]) -> tuple[list[ReplicaSpec], list[FieldProblem]]:
    replicas: list[ReplicaSpec] = []
    problems: list[FieldProblem] = []
    seen: dict[ReplicaType, Path] = {}
    for index, raw in enumerate(spec.get("replicaSpecs") or []):
        path: Path = ("spec", "replicaSpecs", index)
        replica_type = ReplicaType(raw.get("mxReplicaType", ReplicaType.WORKER.value))
        if replica_type in seen:
            problems.append(
                FieldProblem(
                    (*path, "mxReplicaType"),
                    f"{replica_type} appears twice (also at {format_path(seen[replica_type])})",
                )
            )
            continue
        seen[replica_type] = path
        template = raw.get("template") or {}
        policy, policy_problems = _restart_policy(
            None, template, path, default=RestartPolicy.ON_FAILURE
        )
        problems += policy_problems
        count, count_problems = _replica_count(raw, path)
        problems += count_problems
        replicas.append(
            ReplicaSpec(
                type=replica_type,
                replicas=count,
                restart_policy=policy,
                template=template,
                ps_root_port=int(raw.get("PsRootPort", DEFAULT_PS_ROOT_PORT)),
                path=path,
            )
        )
    return replicas, problems


def _kubeflow_replicas(spec: Mapping[str, Any]) -> tuple[list[ReplicaSpec], list[FieldProblem]]:
    replicas: list[ReplicaSpec] = []
    problems: list[FieldProblem] = []
    for type_name, raw in (spec.get("mxReplicaSpecs") or {}).items():
        path: Path = ("spec", "mxReplicaSpecs", type_name)
        template = raw.get("template") or {}
        policy, policy_problems = _restart_policy(
            raw.get("restartPolicy"), template, path, default=RestartPolicy.NEVER
        )
        count, count_problems = _replica_count(raw, path)
        problems += policy_problems + count_problems
        replicas.append(
            ReplicaSpec(
                type=KUBEFLOW_REPLICA_TYPES[type_name],
                replicas=count,
                restart_policy=policy,
                template=template,
                ps_root_port=_kubeflow_port(template),
                path=path,
            )
        )
    return replicas, problems


def _replica_count(raw: Mapping[str, Any], path: Path) -> tuple[int, list[FieldProblem]]:
    """The replica count (default 1), bounded: above MAX_REPLICAS nothing per replica runs."""
    count = int(raw.get("replicas", 1))
    if count > MAX_REPLICAS:
        message = f"must be at most {MAX_REPLICAS}, not {count}"
        return count, [FieldProblem((*path, "replicas"), message)]
    return count, []


def _kubeflow_port(template: Mapping[str, Any]) -> int:
    """Kubeflow names the scheduler's port `mxjob-port` on the mxnet container."""
    container = mxnet_container(template) or {}
    for port in _mappings(container.get("ports") or []):
        if port.get("name") == KUBEFLOW_PORT_NAME:
            return int(port["containerPort"])
    return DEFAULT_PS_ROOT_PORT


def _job_mode(spec: Mapping[str, Any], replicas: list[ReplicaSpec]) -> JobMode:
    """The seed's `jobMode` as written; otherwise (Kubeflow's MXTrain, or none) inferred:
    a job of WORKER replicas only is local, anything with a SCHEDULER or SERVER is dist."""
    if spec.get("jobMode") in (JobMode.LOCAL.value, JobMode.DIST.value):
        return JobMode(spec["jobMode"])
    if all(r.type is ReplicaType.WORKER for r in replicas):
        return JobMode.LOCAL
    return JobMode.DIST


def _restart_policy(
    declared: str | None, template: Mapping[str, Any], path: Path, *, default: RestartPolicy
) -> tuple[RestartPolicy, list[FieldProblem]]:
    """The replica's restart policy: declared on the replica, else in its pod template."""
    in_template = (template.get("spec") or {}).get("restartPolicy")
    if declared is not None and in_template is not None and declared != in_template:
        problem = FieldProblem(
            (*path, "template", "spec", "restartPolicy"),
            f"{in_template} contradicts the replica's restartPolicy {declared}; set only one",
        )
        return default, [problem]
    value = declared if declared is not None else in_template
    if value is None:
        return default, []
    field_path = (
        (*path, "restartPolicy")
        if declared is not None
        else (*path, "template", "spec", "restartPolicy")
    )
    allowed = [p.value for p in RestartPolicy if declared is not None or p is not p.EXIT_CODE]
    if value not in allowed:
        problem = FieldProblem(
            field_path,
            f"restartPolicy {value} is not supported: each replica runs as a batch Job, "
            f"use {' or '.join(allowed)}",
        )
        return default, [problem]
    return RestartPolicy(value), []


_RUN_POLICY_FIELDS = {
    "cleanPodPolicy": "clean_pod_policy",
    "ttlSecondsAfterFinished": "ttl_seconds_after_finished",
    "activeDeadlineSeconds": "active_deadline_seconds",
    "backoffLimit": "backoff_limit",
    "suspend": "suspend",
}


def _run_policy(spec: Mapping[str, Any]) -> tuple[RunPolicy, list[FieldProblem]]:
    """Kubeflow run policy: under `runPolicy`, or inline in `spec` (the older form)."""
    nested: Mapping[str, Any] = spec.get("runPolicy") or {}
    values: dict[str, Any] = {}
    problems: list[FieldProblem] = []
    for name, attribute in _RUN_POLICY_FIELDS.items():
        inline, inner = spec.get(name), nested.get(name)
        if inline is not None and inner is not None and inline != inner:
            problems.append(
                FieldProblem(
                    ("spec", name),
                    f"{inline!r} contradicts spec.runPolicy.{name} {inner!r}; set only one",
                )
            )
        value = inner if inner is not None else inline
        if value is not None:
            values[attribute] = value
    if "clean_pod_policy" in values:
        values["clean_pod_policy"] = CleanPodPolicy(values["clean_pod_policy"])
    return RunPolicy(**values), problems


def _on_change(metadata: Mapping[str, Any]) -> tuple[OnChange, list[FieldProblem]]:
    value = (metadata.get("annotations") or {}).get(ON_CHANGE_ANNOTATION, OnChange.REPLACE.value)
    try:
        return OnChange(value), []
    except ValueError:
        allowed = " or ".join(o.value for o in OnChange)
        path: Path = ("metadata", "annotations", ON_CHANGE_ANNOTATION)
        return OnChange.REPLACE, [FieldProblem(path, f"{value!r} is not one of {allowed}")]


# -- semantic rules -----------------------------------------------------------


def _semantic_problems(job: MxJob) -> list[FieldProblem]:
    problems = _mode_problems(job) + _name_problems(job)
    for replica in job.replica_specs:
        problems += _container_problems(replica)
    return problems


def _mode_problems(job: MxJob) -> list[FieldProblem]:
    replicas_path: Path = (
        ("spec", "replicaSpecs") if job.dialect is Dialect.SEED else ("spec", "mxReplicaSpecs")
    )
    present = {r.type for r in job.replica_specs}
    problems: list[FieldProblem] = []
    if job.mode is JobMode.LOCAL:
        worker = job.replica(ReplicaType.WORKER)
        if present != {ReplicaType.WORKER}:
            problems.append(
                FieldProblem(
                    replicas_path,
                    "a local job has exactly one replica set, of type WORKER "
                    f"(found {', '.join(sorted(present)) or 'none'})",
                )
            )
        elif worker is not None and worker.replicas != 1:
            problems.append(
                FieldProblem(
                    (*worker.path, "replicas"),
                    f"a local job runs exactly 1 WORKER replica, not {worker.replicas}",
                )
            )
    else:
        missing = [t.value for t in ReplicaType if t not in present]
        if missing:
            problems.append(
                FieldProblem(
                    replicas_path,
                    "a dist job needs SCHEDULER, SERVER and WORKER replica sets; "
                    f"missing {', '.join(missing)}",
                )
            )
    scheduler = job.replica(ReplicaType.SCHEDULER)
    if scheduler is not None and scheduler.replicas != 1:
        problems.append(
            FieldProblem(
                (*scheduler.path, "replicas"),
                f"SCHEDULER has exactly 1 replica, not {scheduler.replicas}",
            )
        )
    return problems


def _name_problems(job: MxJob) -> list[FieldProblem]:
    name_path: Path = ("metadata", "name")
    if not is_dns1123_label(job.name):
        return [
            FieldProblem(
                name_path,
                f"{job.name!r} is not a valid name: lower-case letters, digits and '-', "
                "starting and ending with a letter or digit, at most 63 characters",
            )
        ]
    problems: list[FieldProblem] = []
    if not is_dns1123_label(job.namespace):
        problems.append(
            FieldProblem(("metadata", "namespace"), f"{job.namespace!r} is not a valid namespace")
        )
    if job.replica(ReplicaType.SCHEDULER) is not None and not _DNS1035_LABEL.match(job.name):
        problems.append(
            FieldProblem(
                name_path,
                f"{job.name!r} must start with a letter: the scheduler Service is named after "
                "the job, and Service names are DNS-1035 labels",
            )
        )
    # The first index with the most digits of each type: no loop over every index.
    longest = max(
        (
            job_object_name(
                job, r.type, 10 ** (len(str(r.replicas - 1)) - 1) if r.replicas > 10 else 0
            )
            for r in job.replica_specs
            if r.replicas
        ),
        key=len,
        default="",
    )
    if len(longest) > MAX_NAME_LENGTH:
        allowed = MAX_NAME_LENGTH - (len(longest) - len(job.name))
        problems.append(
            FieldProblem(
                name_path,
                f"{job.name!r} is too long: the derived object name {longest!r} has "
                f"{len(longest)} characters, the maximum is {MAX_NAME_LENGTH}; "
                f"use at most {allowed} characters for this job's name",
            )
        )
    return problems


def _container_problems(replica: ReplicaSpec) -> list[FieldProblem]:
    containers_path: Path = (*replica.path, "template", "spec", "containers")
    containers = (replica.template.get("spec") or {}).get("containers") or []
    index = next(
        (
            i
            for i, c in enumerate(containers)
            if isinstance(c, Mapping) and c.get("name") == CONTAINER_NAME
        ),
        None,
    )
    if index is None:
        return [
            FieldProblem(
                containers_path,
                f"every pod template needs a container named {CONTAINER_NAME!r}",
            )
        ]
    problems = []
    for env_index, env in enumerate(containers[index].get("env") or []):
        if isinstance(env, Mapping) and is_reserved_env(str(env.get("name", ""))):
            problems.append(
                FieldProblem(
                    (*containers_path, index, "env", env_index, "name"),
                    f"{env.get('name')} is set by mxgitops (DMLC_* and MX_CONFIG are reserved); "
                    "remove it",
                )
            )
    return problems


# -- hashing ------------------------------------------------------------------


def _canonical_json(job: MxJob) -> str:
    shape = {
        "name": job.name,
        "namespace": job.namespace,
        "mode": job.mode.value,
        "replicas": [
            {
                "type": r.type.value,
                "replicas": r.replicas,
                "restartPolicy": r.restart_policy.value,
                "psRootPort": r.ps_root_port,
                "template": r.template,
            }
            for r in job.replica_specs
        ],
        "runPolicy": {
            "cleanPodPolicy": job.run_policy.clean_pod_policy,
            "ttlSecondsAfterFinished": job.run_policy.ttl_seconds_after_finished,
            "activeDeadlineSeconds": job.run_policy.active_deadline_seconds,
            "backoffLimit": job.run_policy.backoff_limit,
            "suspend": job.run_policy.suspend,
        },
        "successPolicy": job.success_policy.value,
    }
    return json.dumps(shape, sort_keys=True, separators=(",", ":"), default=str)


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while number:
        number, remainder = divmod(number, 36)
        text = digits[remainder] + text
    return text or "0"
