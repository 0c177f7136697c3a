"""The resources the double serves, described once.

Discovery, routing, validation, error messages and the control plane all need
the same facts about a resource (group, version, kind, plural, whether it has
a status subresource, which schema file describes it).  Keeping them in one
table means a new resource is one line, and the discovery documents cannot
disagree with what the router accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

VERBS = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)


@dataclass(frozen=True)
class Resource:
    """One REST resource (e.g. ``jobs.batch``) as kube-apiserver describes it."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    has_status: bool = False
    # Whether PUT on a missing object creates it (leases and events do).
    allow_create_on_update: bool = False
    # Whether the strategy bumps metadata.generation on spec changes.
    tracks_generation: bool = False
    # Default propagation policy when DeleteOptions has none (batch/v1 Jobs orphan).
    default_propagation: str = "Background"

    def __hash__(self) -> int:
        # Resources key per-kind caches (validators, time trees) looked up on every
        # request: hash what tells them apart, not every field. Equal ones hash equal.
        return hash((self.group, self.plural))

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_prefix(self) -> str:
        return f"/apis/{self.group_version}" if self.group else f"/api/{self.version}"

    @property
    def qualified(self) -> str:
        """Group-qualified resource, as in ``jobs.batch "x" not found``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def key(self) -> str:
        """What the store files its objects under: core and events.k8s.io Events differ."""
        return self.qualified

    @property
    def group_kind(self) -> str:
        """Group-qualified kind, as in ``Job.batch "x" is invalid``."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def schema_file(self) -> str:
        """File name in kubernetes-validate's schema directory."""
        group = self.group.split(".")[0]
        suffix = f"{group}-{self.version}" if group else self.version
        return f"{self.kind.lower()}-{suffix}.json"


RESOURCES: tuple[Resource, ...] = (
    Resource("", "v1", "Pod", "pods", "pod", ("po",), ("all",), has_status=True),
    Resource("", "v1", "Service", "services", "service", ("svc",), ("all",), has_status=True),
    Resource("", "v1", "Event", "events", "event", ("ev",), allow_create_on_update=True),
    Resource("", "v1", "ConfigMap", "configmaps", "configmap", ("cm",)),
    Resource(
        "batch",
        "v1",
        "Job",
        "jobs",
        "job",
        (),
        ("all",),
        has_status=True,
        tracks_generation=True,
        default_propagation="Orphan",
    ),
    Resource("coordination.k8s.io", "v1", "Lease", "leases", "lease", allow_create_on_update=True),
    # What mxgitops writes (`kubectl events` reads both groups). The real server keeps one
    # store for both versions of an Event; the double two: nothing reads one as the other.
    Resource("events.k8s.io", "v1", "Event", "events", "event", allow_create_on_update=True),
)

BY_PATH: dict[tuple[str, str], Resource] = {(r.api_prefix, r.plural): r for r in RESOURCES}
# The core group's Event wins a lookup by plural or kind: the first of the same name.
BY_PLURAL: dict[str, Resource] = {}
BY_KIND: dict[str, Resource] = {}
for _res in RESOURCES:
    BY_PLURAL.setdefault(_res.plural, _res)
    BY_KIND.setdefault(_res.kind, _res)
BY_QUALIFIED: dict[str, Resource] = {r.qualified: r for r in RESOURCES}


def group_versions() -> list[str]:
    """Non-core group versions, in discovery order."""
    seen: list[str] = []
    for r in RESOURCES:
        if r.group and r.group_version not in seen:
            seen.append(r.group_version)
    return seen


def resource(name: str) -> Resource:
    """Look a resource up by plural (``jobs``), qualified name or kind."""
    if name in BY_QUALIFIED:
        return BY_QUALIFIED[name]
    plural = name.split(".")[0]
    if plural in BY_PLURAL:
        return BY_PLURAL[plural]
    if name in BY_KIND:
        return BY_KIND[name]
    raise KeyError(f"unknown resource {name!r}; known: {sorted(BY_PLURAL)}")
