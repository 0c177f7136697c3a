"""Plain Kubernetes objects as mxgitops passes them between modules.

Objects are JSON-shaped dicts, exactly what the API server sends and accepts,
so rendering, planning and reporting stay pure and testable without a client.
Only `cluster.py` turns them into requests. This module also names the labels
and annotations that mark an object as ours.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

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


class Kind(StrEnum):
    JOB = "Job"
    SERVICE = "Service"
    POD = "Pod"
    CONFIG_MAP = "ConfigMap"
    LEASE = "Lease"
    EVENT = "Event"  # events.k8s.io/v1: what a sync did, for `kubectl events`
    JOBSET = "JobSet"  # jobset.x-k8s.io/v1alpha2: the JobSet runtime's one object per job
    WORKLOAD = "Workload"  # kueue.x-k8s.io/v1beta2: Kueue's, read for why a job waits
    WORKLOAD_PRIORITY_CLASS = "WorkloadPriorityClass"  # Kueue's, read by name
    # Kueue's, on a MultiKueue manager: whether it reaches a worker (its Active condition)
    MULTIKUEUE_CLUSTER = "MultiKueueCluster"
    CRON_JOB = "CronJob"  # batch/v1: the sync's; the webhook receiver starts Jobs from it


_KINDS = {kind.value: kind for kind in Kind}


@dataclass(frozen=True, order=True)
class ObjectRef:
    """Enough to address one object: its kind, namespace and name."""

    kind: Kind
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        metadata = obj["metadata"]
        kind = _KINDS.get(obj["kind"]) or Kind(obj["kind"])  # a dict lookup, not an enum call
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
    """Everything of one instance found in the cluster by one LIST per kind."""

    jobs: tuple[KubeObject, ...] = ()
    services: tuple[KubeObject, ...] = ()
    pods: tuple[KubeObject, ...] = ()
    jobsets: tuple[KubeObject, ...] = ()
    # Kueue's Workloads of queued JobSets (listed only when some JobSet is queued)
    workloads: tuple[KubeObject, ...] = ()
    # Events (core/v1) about pods of ours that a disruption took away and that are gone,
    # named by their batch Job's condition: how they went (`trainer.disruption`). Read
    # only while such a batch Job is there; not objects of ours (not in `all`).
    pod_events: tuple[KubeObject, ...] = ()
    # Kueue's MultiKueueClusters (listed only when a Workload names a cluster it runs on):
    # whether the manager reaches it. Not the instance's: not in `all()`.
    clusters: tuple[KubeObject, ...] = ()
    # Kinds not listed: the ledger says this instance has no object of them
    # (`runtimes.unlisted`). Their tuples are empty because none exists, not unread.
    unlisted: frozenset[Kind] = frozenset()
    # Kinds whose LIST answered 404 (a CRD not installed, or reinstalled): none was
    # seen, which does not prove that none exists (`runtimes.in_use`).
    unserved: frozenset[Kind] = frozenset()

    def of(self, kind: Kind) -> tuple[KubeObject, ...]:
        """The objects of one kind (none of a kind that is never listed live)."""
        by_kind = {
            Kind.JOB: self.jobs,
            Kind.SERVICE: self.services,
            Kind.POD: self.pods,
            Kind.JOBSET: self.jobsets,
            Kind.WORKLOAD: self.workloads,
        }
        return by_kind.get(kind, ())

    def all(self) -> tuple[KubeObject, ...]:
        return self.jobs + self.services + self.pods + self.jobsets + self.workloads

    def versions(self) -> frozenset[tuple[str, str]]:
        """(uid, resourceVersion) of every object: equal sets mean nothing changed."""
        return frozenset(
            (o["metadata"].get("uid", ""), o["metadata"].get("resourceVersion", ""))
            for o in self.all()
        )


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


class ClusterAPI(Protocol):
    """What the trainer and apply need of a cluster; `cluster.Cluster` provides it.

    Writes are idempotent: creating an object that exists, or deleting one that
    is gone, succeeds. Failures raise `mxgitops.errors.ClusterError`.
    """

    def create(self, objects: Sequence[KubeObject]) -> None: ...

    def delete(self, refs: Sequence[ObjectRef]) -> None: ...

    def list_live(self, selector: str, unlisted: Collection[Kind] = ...) -> LiveObjects: ...
