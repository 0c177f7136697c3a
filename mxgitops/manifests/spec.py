"""The rules every training job meets, whatever API version it was written in.

A manifest arrives as a dict that already passed the JSON schema of its
version (see `manifests/loading.py`), so types and unknown fields are settled. Its
version's module in `mxgitops.manifests.dialects` converts it into the one `MxJob`
(`model.py`); this module then applies the rules a schema cannot express: job
modes, the `mxnet` container, derived object names, reserved environment
variables, counts checked before any work per replica, and what the API server
refuses in a pod template (`podrules.py`). Which runtime the job runs on, the limits of
the names that runtime derives from it and what it cannot honour of a schedulingPolicy
are the runtime's, asked through the registry (`runtimes/registry.py`). Every problem is
reported with the field path it concerns, never as a traceback.

Warnings are findings that do not make a job invalid but must not pass in
silence: an older API version, a restart policy that is overridden, a removed
GPU resource name, scheduling labels or fields mxgitops cannot honour
(`specwarnings.py`, and each dialect's own). They travel on the job
(`MxJob.warnings`), outside its spec hash.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mxgitops.manifests.dialects import version_of
from mxgitops.manifests.dialects.base import Reading, Version
from mxgitops.manifests.podrules import pod_template_problems
from mxgitops.manifests.specwarnings import manifest_warnings
from mxgitops.model import (
    CONTAINER_NAME,
    DEFAULT_RUNTIME,
    KUBEFLOW_API_VERSION,
    MAX_NAME_LENGTH,
    MAX_REPLICAS,
    NAMESPACE,
    ON_CHANGE_ANNOTATION,
    RENDERED_ENV_NAMES,
    SUCCESS_POLICY_ANNOTATION,
    Dialect,
    FieldProblem,
    JobMode,
    MxJob,
    OnChange,
    Path,
    ReplicaSpec,
    ReplicaType,
    SpecError,
    SuccessPolicy,
)
from mxgitops.runtimes import registry
from mxgitops.runtimes.shared import scheduling

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# What `kubectl get -o yaml` adds to an object: a manifest never carries them.
_DUMP_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "deletionTimestamp",
)
# SCHEDULER, SERVER, WORKER -> 0, 1, 2: iterating an Enum per job costs more than the rule.
_REPLICA_ORDER = {replica_type: index for index, replica_type in enumerate(ReplicaType)}
_TUNING_TYPES = ("Tuner", "TunerServer", "TunerTracker")


def dialect_of(doc: Mapping[str, Any]) -> Dialect | None:
    """The API version of a manifest, or None when it is not an MXNet training job."""
    version = version_of(doc)
    return version.dialect if version is not None else None


def refusals(doc: Mapping[str, Any]) -> list[FieldProblem]:
    """Problems that make every other check pointless (checked before the schema)."""
    dump = dump_fields(doc)
    if dump:
        return [
            FieldProblem(
                (dump[0],),
                f"this is `kubectl get` output, not a manifest ({', '.join(dump)}): remove "
                "those fields, or run mxgitops convert FILE, which does",
            )
        ]
    spec = doc.get("spec")
    version = version_of(doc)
    # kubeflow.org/v1alpha2 had no jobMode: its operator ignored one (its dialect warns).
    mode_read = version is None or version.dialect is not Dialect.KUBEFLOW_V1ALPHA2
    if isinstance(spec, Mapping) and spec.get("jobMode") == "MXTune" and mode_read:
        return [
            FieldProblem(
                ("spec", "jobMode"),
                "jobMode MXTune is not supported: mxgitops runs training jobs only "
                "(jobMode MXTrain)",
            )
        ]
    replicas = spec.get("mxReplicaSpecs") if isinstance(spec, Mapping) else None
    tuning = [t for t in _TUNING_TYPES if isinstance(replicas, Mapping) and t in replicas]
    if tuning:
        return [
            FieldProblem(
                ("spec", "mxReplicaSpecs", tuning[0]),
                f"{', '.join(tuning)} replicas are for tuning (MXTune), which is not "
                "supported: mxgitops runs training jobs only (Scheduler, Server, Worker)",
            )
        ]
    return []


def dump_fields(doc: Mapping[str, Any]) -> list[str]:
    """The fields that show a document is `kubectl get` output (`status: {}` alone is not)."""
    metadata = doc.get("metadata")
    written = metadata if isinstance(metadata, Mapping) else {}
    found = [f"metadata.{name}" for name in _DUMP_METADATA if name in written]
    if doc.get("status") not in (None, {}):
        found.insert(0, "status")
    return found


def from_manifest(
    doc: Mapping[str, Any],
    *,
    default_namespace: str = NAMESPACE,
    source_path: str = "",
    default_runtime: str = DEFAULT_RUNTIME,
) -> MxJob:
    """Convert a schema-valid manifest of any version; raise SpecError on rule breaks."""
    version = version_of(doc)
    if version is None:
        raise SpecError([FieldProblem(("kind",), "not an MxJob manifest")])
    problems = refusals(doc)
    if problems:
        raise SpecError(problems)
    return read_manifest(
        doc,
        version,
        default_namespace=default_namespace,
        source_path=source_path,
        default_runtime=default_runtime,
    )


def read_manifest(
    doc: Mapping[str, Any],
    version: Version,
    *,
    default_namespace: str = NAMESPACE,
    source_path: str = "",
    default_runtime: str = DEFAULT_RUNTIME,
) -> MxJob:
    """`from_manifest` of a document known to be of `version` and refused by nothing
    (`manifests` asks both before the schema, once per document). `default_runtime` is
    the operator's, for dist jobs that name no queue (`registry.runtime_for`)."""
    metadata: Mapping[str, Any] = doc.get("metadata") or {}
    reading = version.read(doc.get("spec") or {})
    on_change, on_change_problems = _on_change(metadata)
    success, success_said = _success_policy(metadata, doc.get("spec") or {}, reading, version)
    replicas = reading.replicas
    queue, queue_problems, queue_warnings = scheduling.queue_of(
        metadata.get("labels") or {}, reading.scheduling, reading.scheduling_path
    )
    mode = reading.mode or _inferred_mode(replicas)
    job = MxJob(
        name=str(metadata.get("name", "")),
        namespace=str(metadata.get("namespace") or default_namespace),
        mode=mode,
        replica_specs=tuple(sorted(replicas, key=lambda r: _REPLICA_ORDER[r.type])),
        run_policy=reading.run_policy,
        success_policy=success,
        on_change=on_change,
        dialect=version.dialect,
        runtime=registry.runtime_for(mode, queue, default_runtime),
        queue=queue,
        priority_class=str(reading.scheduling.get("priorityClass") or ""),
        source_path=source_path,
    )
    problems = reading.problems + on_change_problems + queue_problems
    problems += [p for p in success_said if p.path[0] == "metadata"]
    if any(r.replicas > MAX_REPLICAS for r in job.replica_specs):
        raise SpecError(problems)  # counted already; the rules below work per replica
    problems += _semantic_problems(job, version)
    if problems:
        raise SpecError(problems)
    warnings = manifest_warnings(doc, version, job) + reading.warnings + queue_warnings
    warnings += [w for w in success_said if w.path[0] == "spec"]
    runtime = registry.runtime_of(job)
    warnings += runtime.scheduling_warnings(job, reading.scheduling, reading.scheduling_path)
    return replace(job, warnings=tuple(warnings)) if warnings else job


def is_dns1123_label(value: str, max_length: int = MAX_NAME_LENGTH) -> bool:
    """Lower-case letters, digits and '-', starting and ending with a letter or digit."""
    return len(value) <= max_length and _DNS1123_LABEL.match(value) is not None


def is_reserved_env(name: str) -> bool:
    return name in RENDERED_ENV_NAMES


def _inferred_mode(replicas: list[ReplicaSpec]) -> JobMode:
    """A job of WORKER replicas only is local, anything with a SCHEDULER or SERVER is dist."""
    if all(r.type is ReplicaType.WORKER for r in replicas):
        return JobMode.LOCAL
    return JobMode.DIST


def _on_change(metadata: Mapping[str, Any]) -> tuple[OnChange, list[FieldProblem]]:
    value = (metadata.get("annotations") or {}).get(ON_CHANGE_ANNOTATION, OnChange.REPLACE.value)
    try:
        return OnChange(value), []
    except ValueError:
        allowed = " or ".join(o.value for o in OnChange)
        path: Path = ("metadata", "annotations", ON_CHANGE_ANNOTATION)
        return OnChange.REPLACE, [FieldProblem(path, f"{value!r} is not one of {allowed}")]


def _success_policy(
    metadata: Mapping[str, Any], spec: Mapping[str, Any], reading: Reading, version: Version
) -> tuple[SuccessPolicy, list[FieldProblem]]:
    """The success policy, from `spec.successPolicy` or the annotation (they must agree);
    what is said of it: problems under `metadata`, a warning under `spec`. kubeflow.org/v1
    has no field for it: the operator's CRD refuses it under strict validation."""
    path: Path = ("metadata", "annotations", SUCCESS_POLICY_ANNOTATION)
    value = (metadata.get("annotations") or {}).get(SUCCESS_POLICY_ANNOTATION)
    if value is None:
        said: list[FieldProblem] = []
        if version.dialect is Dialect.KUBEFLOW and "successPolicy" in spec:
            said.append(
                FieldProblem(
                    ("spec", "successPolicy"),
                    f"not a field of {KUBEFLOW_API_VERSION} (mxnet-operator's v1beta1 had it): "
                    "the operators' CRDs dropped it (or refuse it under strict validation); "
                    f"mxgitops reads it, but say it with the annotation "
                    f"{SUCCESS_POLICY_ANNOTATION} (mxgitops convert writes it so)",
                )
            )
        return reading.success_policy, said
    allowed = {p.value for p in SuccessPolicy}
    if value not in allowed:
        choices = " or ".join(repr(a) for a in sorted(allowed))
        return reading.success_policy, [FieldProblem(path, f"{value!r} is not one of {choices}")]
    if "successPolicy" in spec and spec["successPolicy"] != value:
        why = f"{value!r} contradicts spec.successPolicy {spec['successPolicy']!r}; set only one"
        return reading.success_policy, [FieldProblem(path, why)]
    return SuccessPolicy(value), []


# -- semantic rules -----------------------------------------------------------


def _semantic_problems(job: MxJob, version: Version) -> list[FieldProblem]:
    problems = _mode_problems(job, ("spec", version.replicas_field)) + _name_problems(job)
    for replica in job.replica_specs:
        problems += _container_problems(replica)
        problems += pod_template_problems(replica.template, (*replica.path, "template"))
    return problems


def _mode_problems(job: MxJob, replicas_path: Path) -> list[FieldProblem]:
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
        missing = [t.value for t in _REPLICA_ORDER if t not in present]
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
    return problems + registry.runtime_of(job).name_problems(job)  # the names it derives


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
    for number, container in enumerate(containers):
        if not isinstance(container, Mapping):
            continue
        # Every container gets mxgitops' variables (a sidecar reads them too).
        for env_index, env in enumerate(container.get("env") or []):
            if isinstance(env, Mapping) and is_reserved_env(str(env.get("name", ""))):
                problems.append(
                    FieldProblem(
                        (*containers_path, number, "env", env_index, "name"),
                        f"{env.get('name')} is set by mxgitops on every container; remove it",
                    )
                )
    return problems
