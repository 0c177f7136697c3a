"""Plain Kubernetes objects as mxgitops passes them between modules.

Objects are JSON-shaped dicts, exactly what the API server sends and accepts,
so rendering, planning and reporting stay pure and testable without a client.
Only `cluster.py` turns them into requests. This module also names the labels
and annotations that mark an object as ours.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, ClassVar

from mxgitops.errors import MxGitOpsError

KubeObject = dict[str, Any]

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "mxgitops"
INSTANCE_LABEL = "mxgitops.io/instance"
JOB_NAME_LABEL = "mxgitops.io/job"
SPEC_HASH_ANNOTATION = "mxgitops.io/spec-hash"
SOURCE_ANNOTATION = "mxgitops.io/source"
COMMIT_ANNOTATION = "mxgitops.io/commit"
# What that annotation holds when mxgitops wrote it: a full SHA-1 or SHA-256 commit id, as
# git writes it (anyone who may edit the object may write anything else there).
FULL_COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class Kind(str):
    """A kind of object mxgitops reads or writes, and where the API serves it.

    The core kinds are named here; a runtime defines the kinds only it uses in its own
    package (`Kind.define`), so that nothing outside it names them. A kind compares
    and hashes as its name ("Job"), and `Kind(name)` is the one defined under it."""

    api: str  # the group's path: /api/v1, /apis/batch/v1
    resource: str  # its plural, in paths
    unread: tuple[tuple[str, str], ...]  # fields of a live object planning never reads
    # List fields whose items are read in part: (section, field, the keys kept of each)
    partly_read: tuple[tuple[str, str, tuple[str, ...]], ...]
    tenant: bool  # one of a job's objects: written (and read back) as the tenant
    ours: bool  # an instance's objects, or made for them: else read beside them only
    # The status fields its readers use, each's type (`livecheck.py`; the core kinds'
    # are there), checked as a LIST brings them.
    status: Mapping[str, Any] | None
    _known: ClassVar[dict[str, Kind]] = {}

    JOB: ClassVar[Kind]
    SERVICE: ClassVar[Kind]
    POD: ClassVar[Kind]
    CONFIG_MAP: ClassVar[Kind]
    LEASE: ClassVar[Kind]
    EVENT: ClassVar[Kind]
    CRON_JOB: ClassVar[Kind]

    def __new__(cls, name: str) -> Kind:
        known = cls._known.get(name)
        if known is None:
            raise ValueError(f"{name!r} is not a kind mxgitops knows")
        return known

    def __reduce__(self) -> tuple[type[Kind], tuple[str]]:
        return (Kind, (str(self),))

    @classmethod
    def define(
        cls,
        name: str,
        api: str,
        resource: str,
        *,
        unread: tuple[tuple[str, str], ...] = (),
        partly_read: tuple[tuple[str, str, tuple[str, ...]], ...] = (),
        tenant: bool = False,
        status: Mapping[str, Any] | None = None,
        ours: bool = True,
    ) -> Kind:
        """The kind `name`, served at `api`/`resource` (defined once: again, the same)."""
        kind = cls._known.get(name)
        if kind is None:
            kind = str.__new__(cls, name)
            kind.api, kind.resource, kind.unread, kind.tenant = api, resource, unread, tenant
            kind.partly_read = partly_read
            kind.status, kind.ours = status, ours
            cls._known[name] = kind
        return kind

    @property
    def api_version(self) -> str:
        """Its apiVersion: its group's path without the leading /api/ or /apis/."""
        return self.api.split("/", 2)[2]

    @classmethod
    def known(cls) -> tuple[Kind, ...]:
        return tuple(cls._known.values())


# What planning (batch/live.py, batch/status.py, batch/inplace.py) never reads of a live
# object, most of its size: a batch Job's pod template (its run-policy fields, metadata
# and status are read), a pod's volumes and its containers but their names and resources
# (its metadata and status are; the training record's resource use reads the requests).
# Of a Service it reads the metadata alone: those are listed so.
Kind.JOB = Kind.define("Job", "/apis/batch/v1", "jobs", unread=(("spec", "template"),), tenant=True)
Kind.SERVICE = Kind.define("Service", "/api/v1", "services", tenant=True)
Kind.POD = Kind.define(
    "Pod",
    "/api/v1",
    "pods",
    unread=(("spec", "volumes"),),
    partly_read=(
        ("spec", "containers", ("name", "resources")),
        ("spec", "initContainers", ("name", "resources", "restartPolicy")),
    ),
    tenant=True,
)
Kind.CONFIG_MAP = Kind.define("ConfigMap", "/api/v1", "configmaps")
Kind.LEASE = Kind.define("Lease", "/apis/coordination.k8s.io/v1", "leases")
# events.k8s.io/v1: what a sync did, for `kubectl events`
Kind.EVENT = Kind.define("Event", "/apis/events.k8s.io/v1", "events")
# batch/v1: the sync's; the webhook receiver starts Jobs from it
Kind.CRON_JOB = Kind.define("CronJob", "/apis/batch/v1", "cronjobs")


@dataclass(frozen=True, order=True)
class ObjectRef:
    """Enough to address one object: its kind, namespace and name."""

    kind: Kind
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        metadata = obj["metadata"]
        kind = Kind(obj["kind"])
        return cls(kind, metadata.get("namespace", ""), metadata["name"])

    def sort_key(self) -> tuple[str, str, str]:
        """The order `sorted` gives refs, compared as plain tuples: a sort of thousands
        of refs does not call the generated `__lt__` for every comparison."""
        return (self.kind, self.namespace, self.name)

    def __str__(self) -> str:
        return f"{self.kind.lower()}/{self.name} in {self.namespace}"


def ownership_labels(instance: str) -> dict[str, str]:
    """The labels every object of this mxgitops instance carries, and no other object."""
    return {MANAGED_BY_LABEL: MANAGED_BY, INSTANCE_LABEL: instance}


def ownership_selector(instance: str) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(ownership_labels(instance).items()))


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = (obj.get("metadata") or {}).get("labels") or {}
    return labels


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    annotations: Mapping[str, str] = (obj.get("metadata") or {}).get("annotations") or {}
    return annotations


def first_created(found: Iterable[Mapping[str, Any]]) -> str:
    """The earliest creationTimestamp of `found`, as the API server wrote it (RFC 3339 in
    UTC, which sorts as text); "" when none has one that could be one."""
    stamps = [
        stamp
        for obj in found
        if isinstance(stamp := (obj.get("metadata") or {}).get("creationTimestamp"), str)
        and 0 < len(stamp) <= _MAX_STAMP
    ]
    return min(stamps, default="")


_MAX_STAMP = 40  # "2026-01-02T03:04:05.123456789+00:00" and then some


def is_owned(obj: Mapping[str, Any], instance: str) -> bool:
    labels = labels_of(obj)
    return all(labels.get(k) == v for k, v in ownership_labels(instance).items())


def same_owner(obj: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """Both carry our managed-by label and the same instance label."""
    return labels_of(obj).get(MANAGED_BY_LABEL) == MANAGED_BY and is_owned(
        obj, labels_of(other).get(INSTANCE_LABEL, "")
    )


@dataclass(frozen=True)
class LiveObjects:
    """Everything of one instance found in the cluster by one LIST per kind, by kind.

    Batch Jobs, Services and pods are fields (every sync lists them); any other kind a
    runtime reads (`runtime/base.py`'s `kinds`) is in `kinds`."""

    jobs: tuple[KubeObject, ...] = ()
    services: tuple[KubeObject, ...] = ()
    pods: tuple[KubeObject, ...] = ()
    kinds: Mapping[Kind, tuple[KubeObject, ...]] = field(default_factory=dict)
    # Events (core/v1) about pods of ours that a disruption took away and that are gone,
    # named by their batch Job's condition: how they went (`runtime.disruption`). Read
    # only while such a batch Job is there; not objects of ours (not in `all`).
    pod_events: tuple[KubeObject, ...] = ()
    # Kinds not listed: the ledger says this instance has no object of them
    # (`runtimes.unlisted`). None of them is here because none exists, not unread.
    unlisted: frozenset[Kind] = frozenset()
    # Kinds whose LIST answered 404 (a CRD not installed, or reinstalled): none was
    # seen, which does not prove that none exists (`runtimes.in_use`).
    unserved: frozenset[Kind] = frozenset()

    @cached_property
    def _by_kind(self) -> Mapping[Kind, tuple[KubeObject, ...]]:
        core = {Kind.JOB: self.jobs, Kind.SERVICE: self.services, Kind.POD: self.pods}
        return {**core, **{kind: tuple(found) for kind, found in self.kinds.items()}}

    @classmethod
    def of_objects(cls, found: Iterable[KubeObject]) -> LiveObjects:
        """`found`, sorted out by kind, in their order."""
        by_kind: dict[Kind, list[KubeObject]] = {}
        for obj in found:
            by_kind.setdefault(Kind(obj["kind"]), []).append(obj)
        live = cls()
        for kind, objs in by_kind.items():
            live = live.with_kind(kind, tuple(objs))
        return live

    def of(self, kind: Kind) -> tuple[KubeObject, ...]:
        """The objects of one kind (none of a kind that is never listed live)."""
        return self._by_kind.get(kind, ())

    def with_kind(self, kind: Kind, found: tuple[KubeObject, ...]) -> LiveObjects:
        """The same objects, with `found` as those of `kind` (one runtime's share of the
        pods, a test's objects changed)."""
        if kind is Kind.JOB:
            return replace(self, jobs=found)
        if kind is Kind.SERVICE:
            return replace(self, services=found)
        if kind is Kind.POD:
            return replace(self, pods=found)
        return replace(self, kinds={**self.kinds, kind: found})

    def all(self) -> tuple[KubeObject, ...]:
        """The instance's objects (and those made for them), not what is read beside
        them (`Kind.ours`)."""
        return tuple(o for kind, found in self._by_kind.items() if kind.ours for o in found)

    def versions(self) -> frozenset[tuple[str, str]]:
        """(uid, resourceVersion) of every object: equal sets mean nothing changed."""
        return frozenset(
            (o["metadata"].get("uid", ""), o["metadata"].get("resourceVersion", ""))
            for o in self.all()
        )


@dataclass(frozen=True)
class Listing:
    """How a sync LISTs one of a runtime's own kinds (batch Jobs, Services and pods are
    always listed): a LIST that answers 404 (the CRD not installed) sees none of them."""

    kind: Kind
    # By the ownership selector; else every object of the kind (a controller's objects
    # made for ours, which it does not label with our labels).
    selected: bool = True
    # Listed only when this holds of what was listed before it (None: always).
    only_if: Callable[[LiveObjects], bool] | None = None
    # Where the LIST may be forbidden (a ClusterRole from before it was granted): none
    # is read, and this is logged; "": a 403 is the sync's error, as any.
    if_forbidden: str = ""


@dataclass(frozen=True)
class Create:
    obj: KubeObject

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef.of(self.obj)


@dataclass(frozen=True)
class Delete:
    """`foreground`: the object stays (being deleted) until the garbage collector has
    removed its dependents, so its absence means its pods are gone too."""

    ref: ObjectRef
    foreground: bool = False


@dataclass(frozen=True)
class Patch:
    """A JSON merge patch of an object's fields that change in place."""

    ref: ObjectRef
    body: KubeObject


Write = Create | Delete | Patch


@dataclass(frozen=True)
class WriteResult:
    write: Write
    error: MxGitOpsError | None = None
    warnings: tuple[str, ...] = ()  # the response's Warning headers (PodSecurity's, ...)

    @property
    def ok(self) -> bool:
        return self.error is None
