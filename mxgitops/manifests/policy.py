"""Policy: what a job of the jobs repository may run, and where.

Whoever can merge into the jobs repository runs pods with mxgitops' rights, so
a manifest is checked against a policy before anything of it is written: in
the pull request (`validate`, `diff`) and again at sync, where a violating job
is held (`plan.py`). Two places set policy. The operator's (`--policy-file`,
`MXGITOPS_POLICY_FILE`) starts from the defaults below; the jobs repository's
`policy` section of `.mxgitops.yaml` can only make it stricter: for each key
the stricter of the two wins (`combine`). Nothing here performs I/O but
`read_file`, which reads the operator's file as carefully as a manifest.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from decimal import Decimal
from pathlib import Path
from typing import Any

from mxgitops.errors import ConfigError
from mxgitops.manifests import quantity
from mxgitops.manifests.files import read_section
from mxgitops.manifests.podsecurity import Level, check
from mxgitops.manifests.yamldoc import FieldPath
from mxgitops.model import MxJob

MAX_FILE_SIZE = 64 * 1024
OPERATOR = "the operator's policy"
REPOSITORY = ".mxgitops.yaml's policy"
DEFAULT = "the default policy"


@dataclass(frozen=True)
class Allowed:
    """A list key as one party set it: empty means that key's default (see `Policy`)."""

    values: tuple[str, ...] = ()
    source: str = DEFAULT


@dataclass(frozen=True)
class Policy:
    """The effective policy: each list key is every party's list (a job must pass all of
    them), each other key the strictest value, with the party that set it."""

    allowed_namespaces: tuple[Allowed, ...] = ()  # empty: the default namespace only
    pod_security: tuple[Level, str] = (Level.BASELINE, DEFAULT)
    allowed_images: tuple[Allowed, ...] = ()  # empty: any image
    require_resource_limits: tuple[bool, str] = (False, DEFAULT)
    max_replicas_per_job: tuple[int, str] = (256, DEFAULT)
    max_gpus_per_job: tuple[int, str] = (64, DEFAULT)
    allowed_service_accounts: tuple[Allowed, ...] = ()  # empty: the namespace's default only
    allowed_priority_classes: tuple[Allowed, ...] = ()  # empty: any


DEFAULT_POLICY = Policy()

# key of the `policy` section -> (Policy field, what its value must be)
KEYS: dict[str, tuple[str, str]] = {
    "allowedNamespaces": ("allowed_namespaces", "list"),
    "podSecurity": ("pod_security", "level"),
    "allowedImages": ("allowed_images", "list"),
    "requireResourceLimits": ("require_resource_limits", "bool"),
    "maxReplicasPerJob": ("max_replicas_per_job", "count"),
    "maxGpusPerJob": ("max_gpus_per_job", "count"),
    "allowedServiceAccounts": ("allowed_service_accounts", "list"),
    "allowedPriorityClasses": ("allowed_priority_classes", "list"),
}
LIST_FIELDS = frozenset(attribute for attribute, kind in KEYS.values() if kind == "list")
_EXPECTED = {
    "list": "a list of strings",
    "level": "one of privileged, baseline, restricted",
    "bool": "true or false",
    "count": "a whole number of at least 0",
}


def parse(raw: object, *, where: str, source: str) -> dict[str, Any]:
    """The keys a `policy` section sets (Policy field -> value); ConfigError when a key
    is unknown or a value has the wrong type."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping of policy keys ({', '.join(KEYS)})")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in KEYS:
            raise ConfigError(f"{where}.{key}: not a policy key (known: {', '.join(KEYS)})")
        attribute, kind = KEYS[key]
        parsed = _value(kind, value)
        if parsed is None:
            raise ConfigError(f"{where}.{key}: expected {_EXPECTED[kind]}, got {_quoted(value)}")
        values[attribute] = (Allowed(parsed, source),) if kind == "list" else (parsed, source)
    return values


def _value(kind: str, value: object) -> Any:
    if kind == "list":
        ok = isinstance(value, list) and all(isinstance(v, str) and v for v in value)
        return tuple(value) if ok and isinstance(value, list) else None
    if kind == "level":
        return Level(value) if isinstance(value, str) and value in list(Level) else None
    if kind == "bool":
        return value if isinstance(value, bool) else None
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None


def combine(operator: Mapping[str, Any], *tighter: Mapping[str, Any]) -> Policy:
    """The defaults with the operator's settings in their place, then made stricter key by
    key by each of `tighter` (the jobs repository's): those can never loosen a key."""
    merged: dict[str, Any] = {}
    for f in fields(Policy):
        current = operator.get(f.name, getattr(DEFAULT_POLICY, f.name))
        if f.name in RESTRICTIVE_WHEN_EMPTY and not current:
            current = (Allowed(),)  # the default's meaning, which a repository cannot widen
        for party in tighter:
            if f.name in party:
                current = _stricter(f.name, current, party[f.name])
        merged[f.name] = current
    return Policy(**merged)


# Lists whose empty default allows one thing (the default namespace, its default account).
RESTRICTIVE_WHEN_EMPTY = frozenset({"allowed_namespaces", "allowed_service_accounts"})


def _stricter(name: str, current: Any, new: Any) -> Any:
    if name in LIST_FIELDS:
        return (*current, *new)  # a job must pass every party's list
    value, other = current[0], new[0]
    if name == "pod_security":
        return new if other.rank > value.rank else current
    if name == "require_resource_limits":
        return new if other and not value else current
    return new if other < value else current  # the maxima


def read_file(path: Path) -> dict[str, Any]:
    """The operator's policy file: YAML with one `policy` section, as in .mxgitops.yaml."""

    section = read_section(path, "policy", MAX_FILE_SIZE, "policy file")
    return parse(section, where=f"policy file {path}: policy", source=OPERATOR)


# -- the checks -------------------------------------------------------------------


@dataclass(frozen=True)
class Violation:
    path: FieldPath  # in the manifest
    message: str  # without the "policy: " prefix


def violations(job: MxJob, policy: Policy, default_namespace: str) -> list[Violation]:
    """Everything of `job` that `policy` does not allow; [] when it passes."""
    return [
        *_namespace(job, policy, default_namespace),
        *_limits(job, policy),
        *_templates(job, policy),
        *_scheduling_priority(job, policy),
    ]


# How a job's namespace is refused: the first violation, and so the hold's reason (plan.py).
NAMESPACE_FORBIDDEN = "allowedNamespaces: namespace"


def forbids_namespace(reason: str) -> bool:
    """Whether a held job's reason says the policy keeps it out of its namespace, where
    nothing of it, not even an Event, may be written."""
    return f"({NAMESPACE_FORBIDDEN} " in reason


def _namespace(job: MxJob, policy: Policy, default_namespace: str) -> Iterator[Violation]:
    for allowed in policy.allowed_namespaces or (Allowed(),):
        permitted = allowed.values or (default_namespace,)
        if job.namespace not in permitted:
            what = (
                ", ".join(permitted) if allowed.values else f"the default namespace, {permitted[0]}"
            )
            yield Violation(
                ("metadata", "namespace"),
                f"{NAMESPACE_FORBIDDEN} {job.namespace} is not allowed "
                f"({allowed.source} allows {what})",
            )
            return


def _limits(job: MxJob, policy: Policy) -> Iterator[Violation]:
    replicas = sum(r.replicas for r in job.replica_specs)
    most, source = policy.max_replicas_per_job
    if replicas > most:
        yield Violation(
            ("spec",), f"maxReplicasPerJob: {replicas} replicas in all, more than {most} ({source})"
        )
    gpus = sum((r.replicas * pod_gpus(r.template) for r in job.replica_specs), _NONE)
    most, source = policy.max_gpus_per_job
    if gpus > most:
        yield Violation(
            ("spec",),
            f"maxGpusPerJob: {_number(gpus)} GPUs in all replicas, more than {most} ({source})",
        )


def _templates(job: MxJob, policy: Policy) -> Iterator[Violation]:
    level, level_source = policy.pod_security
    for replica in job.replica_specs:
        at = (*replica.path, "template")
        template = replica.template
        for v in check(template, level):
            yield Violation((*at, *v.path), f"podSecurity {level} ({level_source}): {v}")
        spec = template.get("spec") or {}
        yield from _service_account(at, spec, policy)
        yield from _priority_class(at, spec, policy)
        yield from _image_volumes(at, spec, policy)
        volumes = {v.get("name") for v in _mappings(spec.get("volumes"))}
        for path, container in _containers(spec):
            yield from _container((*at, *path), container, policy)
            yield from _resources((*at, *path), container)
            yield from _mounts((*at, *path), container, volumes)


def _service_account(at: FieldPath, spec: Mapping[str, Any], policy: Policy) -> Iterator[Violation]:
    for key in ("serviceAccountName", "serviceAccount"):
        name = spec.get(key)
        if not name or name == "default":
            continue
        for allowed in policy.allowed_service_accounts or (Allowed(),):
            if name not in allowed.values:
                what = (
                    ", ".join(allowed.values) if allowed.values else "only the namespace's default"
                )
                yield Violation(
                    (*at, "spec", key),
                    f"allowedServiceAccounts: service account {name} is not allowed "
                    f"({allowed.source} allows {what})",
                )
                break


def _priority_class(at: FieldPath, spec: Mapping[str, Any], policy: Policy) -> Iterator[Violation]:
    name = spec.get("priorityClassName")
    for allowed in policy.allowed_priority_classes:
        if allowed.values and name not in allowed.values:
            yield Violation(
                (*at, "spec", "priorityClassName"),
                f"allowedPriorityClasses: priority class {name or '(none)'} is not allowed "
                f"({allowed.source} allows {', '.join(allowed.values)})",
            )
            return


def _scheduling_priority(job: MxJob, policy: Policy) -> Iterator[Violation]:
    """schedulingPolicy.priorityClass is Kueue's priority of a queued job (its label,
    where a WorkloadPriorityClass of that name exists), whatever the pods name: it is
    held to the same list."""
    name = job.priority_class
    for allowed in policy.allowed_priority_classes:
        if name and allowed.values and name not in allowed.values:
            yield Violation(
                ("spec",),
                f"allowedPriorityClasses: schedulingPolicy.priorityClass {name} is not allowed "
                f"({allowed.source} allows {', '.join(allowed.values)})",
            )
            return


def _image(at: FieldPath, image: str, policy: Policy) -> Iterator[Violation]:
    for allowed in policy.allowed_images:
        if allowed.values and not image.startswith(allowed.values):
            yield Violation(
                at,
                f"allowedImages: image {image or '(none)'} is not from an allowed registry "
                f"({allowed.source} allows {', '.join(allowed.values)})",
            )
            return


def _image_volumes(at: FieldPath, spec: Mapping[str, Any], policy: Policy) -> Iterator[Violation]:
    """An image volume (`volumes[].image`) mounts an image's files: an image the pod
    gets, as much as a container's."""
    for index, volume in enumerate(spec.get("volumes") or []):
        if isinstance(volume, Mapping) and isinstance(volume.get("image"), Mapping):
            reference = str(volume["image"].get("reference") or "")
            path = (*at, "spec", "volumes", index, "image", "reference")
            yield from _image(path, reference, policy)


def _mounts(at: FieldPath, container: Mapping[str, Any], volumes: set[Any]) -> Iterator[Violation]:
    """A mount names one of the pod's own volumes. Kubernetes refuses one that names
    none, but the renderer adds the accelerators' host-path driver volumes to the pod
    of a container that uses one: a mount naming such a volume in the manifest would
    reach the host's directory, from any container, at any path, writable."""
    for index, mount in enumerate(container.get("volumeMounts") or []):
        name = mount.get("name") if isinstance(mount, Mapping) else None
        if name not in volumes:
            yield Violation(
                (*at, "volumeMounts", index, "name"),
                f"volumeMounts: {name!s} names no volume of the pod; an accelerator's "
                "driver volume is mounted by mxgitops alone, in the containers that use it",
            )


def _resources(at: FieldPath, container: Mapping[str, Any]) -> Iterator[Violation]:
    """Quantities Kubernetes would refuse, refused here: read otherwise, an amount of
    GPUs would count as something other than what the node reserves."""
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return
    read: dict[str, dict[str, Decimal]] = {}
    for kind in ("requests", "limits"):
        amounts = resources.get(kind)
        for name, value in amounts.items() if isinstance(amounts, Mapping) else ():
            path = (*at, "resources", kind, str(name))
            try:
                amount = quantity.parse(value)
            except quantity.QuantityError as error:
                yield Violation(path, f"resources: {error}")
                continue
            if amount < 0:
                yield Violation(path, f"resources: {name} {value} must not be negative")
            elif _is_extended(str(name)) and amount != amount.to_integral_value():
                yield Violation(path, f"resources: {name} {value} must be a whole number")
            else:
                read.setdefault(str(name), {})[kind] = amount
    for name, both in read.items():
        if _is_extended(name) and len(both) == 2 and both["requests"] != both["limits"]:
            yield Violation(
                (*at, "resources", "requests", name),
                f"resources: {name} request {_number(both['requests'])} must equal its limit "
                f"{_number(both['limits'])} (Kubernetes does not overcommit devices)",
            )


def _container(at: FieldPath, container: Mapping[str, Any], policy: Policy) -> Iterator[Violation]:
    yield from _image((*at, "image"), str(container.get("image") or ""), policy)
    required, source = policy.require_resource_limits
    limits = (container.get("resources") or {}).get("limits") or {}
    missing = [r for r in ("cpu", "memory") if r not in limits]
    if required and missing:
        yield Violation(
            (*at, "resources", "limits"),
            f"requireResourceLimits: container {container.get('name')} sets no "
            f"{' and no '.join(missing)} limit ({source})",
        )


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[FieldPath, Mapping[str, Any]]]:
    """Every container list a pod has (an ephemeral container runs an image too)."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for index, container in enumerate(spec.get(key) or []):
            if isinstance(container, Mapping):
                yield ("spec", key, index), container


def _is_extended(resource: str) -> bool:
    """An extended resource (a device: `nvidia.com/gpu`), which Kubernetes counts in
    whole units and never overcommits; not the native `cpu`, `memory`, `hugepages-*`,
    `ephemeral-storage` nor `*kubernetes.io/*`."""
    domain, slash, _ = resource.partition("/")
    return bool(slash) and not domain.endswith("kubernetes.io") and domain != "requests"


def is_gpu(resource: str) -> bool:
    """nvidia.com/gpu, amd.com/gpu, gpu.intel.com/i915: a GPU by its name."""
    domain, slash, item = resource.partition("/")
    return bool(slash) and (item == "gpu" or "gpu" in domain.split("."))


def pod_gpus(template: Mapping[str, Any]) -> Decimal:
    """GPUs one pod holds, as the scheduler reserves them (Kubernetes' effective
    requests): its containers and its native sidecars (init containers with
    `restartPolicy: Always`) together, or, while a plain init container runs, that
    one with the sidecars started before it, if more. Per resource, then summed."""
    spec = template.get("spec") or {}
    running: dict[str, Decimal] = {}  # the sidecars started so far
    peak: dict[str, Decimal] = {}  # the most any init step held
    for init in _mappings(spec.get("initContainers")):
        held = _container_gpus(init)
        if init.get("restartPolicy") == "Always":
            running = _added(running, held)
            step = running
        else:
            step = _added(running, held)
        peak = {r: max(peak.get(r, _NONE), step.get(r, _NONE)) for r in {*peak, *step}}
    steady = running
    for container in _mappings(spec.get("containers")):
        steady = _added(steady, _container_gpus(container))
    resources = {*peak, *steady}
    return sum((max(peak.get(r, _NONE), steady.get(r, _NONE)) for r in resources), _NONE)


def _added(a: Mapping[str, Decimal], b: Mapping[str, Decimal]) -> dict[str, Decimal]:
    return {r: a.get(r, _NONE) + b.get(r, _NONE) for r in {*a, *b}}


def _container_gpus(container: Mapping[str, Any]) -> dict[str, Decimal]:
    """Each GPU resource a container holds: its limit, else its request (a device's
    request equals its limit, `_resources`). A quantity Kubernetes would refuse is a
    violation of its own, and counts nothing here."""
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        return {}
    amounts = {**_mapping(resources.get("requests")), **_mapping(resources.get("limits"))}
    held = {}
    for name, value in amounts.items():
        if is_gpu(str(name)):  # most containers name none: no quantity is read
            try:
                held[str(name)] = quantity.parse(value)
            except quantity.QuantityError:
                continue
    return held


_NONE = Decimal(0)


def _number(amount: Decimal) -> str:
    whole = amount == amount.to_integral_value()
    return str(int(amount)) if whole else format(amount.normalize(), "f")


def _mapping(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


def _mappings(items: Any) -> Sequence[Mapping[str, Any]]:
    return [i for i in items or [] if isinstance(i, Mapping)]


def _quoted(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
