"""The MxJob model: what every API version of a training job is read into.

Every manifest dialect and version (see `mxgitops.manifests.dialects`) converts into one
`MxJob`, as a CRD conversion would convert into its storage version; the rules
(`spec.py`), rendering (the runtimes, `runtimes/registry.py`), planning and reports
see only this model.
The spec hash derived from it decides whether a live job is unchanged or must
be replaced, so it covers what shapes the objects and nothing else.

Which runtime a job runs on is a name here (`MxJob.runtime`); what a runtime adds to
the spec hash is the runtime's own (`hash_shape`), given to the model by each entry point
(`runtimes/registry.py`'s `install_hash_shapes`, through `use_hash_shapes`), as the model
cannot import the runtimes (every runtime imports the model).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
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
# The success policy, where a manifest's version has no field for it (kubeflow.org/v1:
# only mxnet-operator's v1beta1 had `successPolicy`); on every object of a job too.
SUCCESS_POLICY_ANNOTATION = "mxgitops.io/success-policy"
# What a job's objects look like is part of its spec hash: a rendering that changes
# what runs (its failure semantics, the pods' DNS names, the environment)
# gives every job a new hash, and earlier ones are still recognised (README upgrade notes).
RENDERING = 2
# What mxgitops sets on every container of every pod (runtime/mxconfig.py), and so
# refuses in a manifest: exactly these, as the operator set them. MXNet's other
# DMLC_* settings (DMLC_INTERFACE, DMLC_ENABLE_RDMA, ...) are the user's.
RENDERED_ENV_NAMES = frozenset(
    {
        "DMLC_PS_ROOT_URI",
        "DMLC_PS_ROOT_PORT",
        "DMLC_NUM_SERVER",
        "DMLC_NUM_WORKER",
        "DMLC_ROLE",
        "DMLC_USE_KUBERNETES",
        "DMLC_WORKER_ID",
        "MX_CONFIG",
    }
)

MAX_NAME_LENGTH = 63
# A bound on every replica count, checked (schema and model) before any work per
# replica: one object per replica index is derived, listed and planned.
MAX_REPLICAS = 10_000
# The seed drew 4 random characters. A runtime id is derived from the spec hash
# instead: the whole 256-bit hash reduced modulo 36**5, so every one of the
# 60,466,176 ids is equally likely and a changed spec keeps the old id (and
# names, which would defeat a replace) with a chance of 1 in 60,466,176.
RUNTIME_ID_LENGTH = 5
# The runtime a job runs on unless its manifest or the operator says otherwise: the
# seed's, one batch Job per replica (`runtimes.RUNTIMES`' first), on which every job
# hashed before runtimes existed ran.
DEFAULT_RUNTIME = "batch"

Path = tuple[str | int, ...]


class Dialect(StrEnum):
    """Every API version of a training job mxgitops reads (each has one kind)."""

    SEED = SEED_API_VERSION  # the seed's list of replica specs
    KUBEFLOW = KUBEFLOW_API_VERSION  # Kubeflow's map of replica specs, current
    MLKUBE_V1BETA1 = "mlkube.io/v1beta1"  # the seed's form under its first group
    KUBEFLOW_V1ALPHA1 = "kubeflow.org/v1alpha1"  # the list form under Kubeflow's group
    KUBEFLOW_V1ALPHA2 = "kubeflow.org/v1alpha2"  # the first map form
    KUBEFLOW_V1BETA1 = "kubeflow.org/v1beta1"


class ReplicaType(StrEnum):
    SCHEDULER = "SCHEDULER"
    SERVER = "SERVER"
    WORKER = "WORKER"

    @property
    def role(self) -> str:
        """The lower-case name used in object names and `DMLC_ROLE`."""
        return self.lower()  # the member is its value, a str: no enum `value` lookup


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
    # Not set in the manifest: its operator's default (mxnet-operator's inline v1: All),
    # hashed as unset, as mxgitops read it before applying it: no job is replaced.
    clean_pod_policy_defaulted: bool = False
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
    runtime: str = DEFAULT_RUNTIME  # a name in `runtimes.RUNTIMES`
    queue: str = ""  # Kueue's LocalQueue (schedulingPolicy.queue, the queue-name label)
    priority_class: str = ""  # schedulingPolicy.priorityClass (already on the pods)
    source_path: str = field(default="", compare=False)
    # What is valid but deserves a word (an older API version, an overridden
    # restart policy...); never part of the spec hash.
    warnings: tuple[FieldProblem, ...] = field(default=(), compare=False)

    def replica(self, replica_type: ReplicaType) -> ReplicaSpec | None:
        return next((r for r in self.replica_specs if r.type is replica_type), None)

    @property
    def key(self) -> tuple[str, str]:
        """What identifies a job across syncs: (namespace, name)."""
        return (self.namespace, self.name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, the JSON of `dataclasses.asdict(job)`; `from_dict` gives back an
        equal job. The pod templates in it are the job's own, where `asdict` would copy
        them deeply (docs/development: measurements): read, not changed."""
        return {
            **fields_of(self),
            "replica_specs": [fields_of(r) for r in self.replica_specs],
            "run_policy": fields_of(self.run_policy),
            "warnings": [fields_of(w) for w in self.warnings],
        }

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
            runtime=data.get("runtime", DEFAULT_RUNTIME),
            queue=data.get("queue", ""),
            priority_class=data.get("priority_class", ""),
            source_path=data["source_path"],
            warnings=tuple(
                FieldProblem(tuple(w["path"]), w["message"]) for w in data.get("warnings", ())
            ),
        )

    @cached_property
    def spec_hash(self) -> str:
        """sha256 of everything that shapes the job's objects and cannot change on a
        live batch Job, and of the rendering's version (`RENDERING`): a rendering that
        changes what runs names new runtimes.

        The dialect, the on-change annotation and the source path are left out:
        rewriting a manifest in the other dialect, or moving it, changes nothing.
        So are suspend, activeDeadlineSeconds, backoffLimit and
        ttlSecondsAfterFinished: they are patched in place, without a new runtime.
        """
        return _sha256(_canonical_json(self, era=RENDERING))

    @cached_property
    def earlier_spec_hashes(self) -> tuple[str, ...]:
        """The spec hashes earlier mxgitops gave this job (newest first): what the ledger
        entries and live objects of jobs from before an upgrade carry. Before the
        rendering of Kubeflow's semantics (`RENDERING`), and before that, before the
        run policy's in-place fields left the hash."""
        hashes = [_sha256(_canonical_json(self, era=era)) for era in (1, 0)]
        return tuple(dict.fromkeys(hashes))

    @property
    def legacy_spec_hash(self) -> str:
        """The spec hash before mxgitops patched the run policy's in-place fields."""
        return self.earlier_spec_hashes[-1]

    @cached_property
    def runtime_id(self) -> str:
        return runtime_id_of(self.spec_hash)


def fields_of(instance: Any) -> dict[str, Any]:
    """A dataclass instance's fields by name, the values themselves: `asdict` one level
    deep, for classes whose fields are plain values."""
    return {f.name: getattr(instance, f.name) for f in fields(instance)}


def runtime_id_of(spec_hash: str) -> str:
    """The runtime id of a spec hash (also how a live object's labels are cross-checked)."""
    number = int(spec_hash, 16) % 36**RUNTIME_ID_LENGTH  # uniform, see above
    return _base36(number).rjust(RUNTIME_ID_LENGTH, "0")


def derived_names(job: MxJob) -> Iterator[tuple[Path, str]]:
    """Every object name a job renders to on the default runtime, with the replica spec
    that causes it: one batch Job per replica index, `{job}-{type}-{runtimeId}-{index}`;
    the scheduler's Service shares the name of the scheduler's Job. Here, not in
    `batch/`, as they are the pods' hostnames `runtime/mxconfig.py` addresses by."""
    for replica in job.replica_specs:
        for index in range(replica.replicas):
            yield replica.path, job_object_name(job, replica.type, index)


def job_object_name(job: MxJob, replica_type: ReplicaType, index: int) -> str:
    return object_name(job.name, replica_type, job.runtime_id, index)


def object_name(name: str, replica_type: ReplicaType, runtime_id: str, index: int) -> str:
    return f"{name}-{replica_type.role}-{runtime_id}-{index}"


def scheduler_service_name(job: MxJob) -> str:
    return job_object_name(job, ReplicaType.SCHEDULER, 0)


def format_path(path: Path) -> str:
    """('spec', 'replicaSpecs', 0, 'template') -> 'spec.replicaSpecs[0].template'."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(document)"


def mxnet_container(template: Mapping[str, Any]) -> Mapping[str, Any] | None:
    containers = (template.get("spec") or {}).get("containers") or []
    return next((c for c in mappings(containers) if c.get("name") == CONTAINER_NAME), None)


def mappings(items: Any) -> Iterator[Mapping[str, Any]]:
    """The mapping items of a list; Kubernetes' schema lets list items be null."""
    return (item for item in items if isinstance(item, Mapping))


# -- hashing ------------------------------------------------------------------


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _canonical_json(job: MxJob, *, era: int) -> str:
    """The job's hashed form in `era`: 0, before the in-place fields left the hash; 1,
    before `RENDERING` was hashed; `RENDERING`, today's."""
    legacy = era == 0
    policy = job.run_policy
    shape: dict[str, Any] = {
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
        # What a live batch Job lets change is patched in place (batch/inplace.py), so
        # it does not name the runtime: hashed as unset, which keeps the hash of every
        # job that sets none of it as it was before (upgrade note in the README).
        "runPolicy": {
            "cleanPodPolicy": None
            if policy.clean_pod_policy_defaulted
            else policy.clean_pod_policy,
            "ttlSecondsAfterFinished": policy.ttl_seconds_after_finished if legacy else None,
            "activeDeadlineSeconds": policy.active_deadline_seconds if legacy else None,
            "backoffLimit": policy.backoff_limit if legacy else None,
            "suspend": policy.suspend if legacy else False,
        },
        "successPolicy": job.success_policy.value,
    }
    if era >= 2:
        shape["rendering"] = era
    runtime = _runtime_shape(job)
    if runtime is not None:  # the default runtime's jobs hash as they always did
        shape["runtime"] = runtime
    return json.dumps(shape, sort_keys=True, separators=(",", ":"), default=str)


HashShape = Callable[[MxJob], Mapping[str, Any] | None]
_HASH_SHAPES: dict[str, HashShape] = {}


def use_hash_shapes(shapes: Mapping[str, HashShape]) -> None:
    """Install what each runtime adds to the spec hash of a job that runs on it, by
    runtime name: `runtimes/registry.py`'s `install_hash_shapes`, which each entry point
    calls before a job is hashed."""
    _HASH_SHAPES.update(shapes)


def _runtime_shape(job: MxJob) -> Mapping[str, Any] | None:
    try:
        shape_of = _HASH_SHAPES[job.runtime]
    except KeyError:  # a hash without its runtime's part would replace running jobs
        known = (
            ", ".join(sorted(_HASH_SHAPES))
            or "none: mxgitops.runtimes.registry.install_hash_shapes() was not called"
        )
        raise LookupError(f"no runtime named {job.runtime!r} (registered: {known})") from None
    return shape_of(job)


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while number:
        number, remainder = divmod(number, 36)
        text = digits[remainder] + text
    return text or "0"
