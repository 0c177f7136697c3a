"""One sync at a time: a coordination.k8s.io/v1 Lease per instance.

The sync takes the Lease only when it is about to write. A second sync that
finds it held by someone else and not expired stops with `LeaseHeldError`
(exit 5) and writes nothing; an expired Lease (its holder died) is taken over.
Creating and replacing with a resourceVersion makes the take-over atomic: of
two syncs racing for the same Lease, the API server lets exactly one win.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from mxgitops.errors import ClusterClientError, ClusterError, LeaseHeldError
from mxgitops.objects import Kind, KubeObject, ObjectRef, ownership_labels

DEFAULT_DURATION_SECONDS = 600


class LeaseAPI(Protocol):
    def get(self, ref: ObjectRef) -> KubeObject | None: ...

    def create_strict(self, obj: KubeObject) -> KubeObject: ...

    def replace(self, obj: KubeObject) -> KubeObject: ...


def default_holder() -> str:
    """Who is syncing: the pod name in a cluster (HOSTNAME), else host and pid."""
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}/{os.getpid()}"


def lease_ref(instance: str, namespace: str) -> ObjectRef:
    return ObjectRef(Kind.LEASE, namespace, f"mxgitops-{instance}")


class HeldLease:
    """The Lease while this sync holds it. A long apply calls `renew_if_due` as it
    goes, so the Lease cannot expire (and be taken over) while writes still run."""

    def __init__(
        self, api: LeaseAPI, lease: KubeObject, clock: Callable[[], datetime] | None = None
    ) -> None:
        self._api = api
        self.lease = lease
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.Lock()  # writes finish on several threads

    def renew_if_due(self) -> None:
        """Renew once a third of the lease's duration has passed since the last renewal."""
        with self._lock:
            spec = self.lease["spec"]
            now = self._clock()
            renewed = _parse_time(spec.get("renewTime"))
            period = timedelta(seconds=int(spec["leaseDurationSeconds"]) / 3)
            if renewed is not None and now < renewed + period:
                return
            fresh = {**self.lease, "spec": {**spec, "renewTime": _micro_time(now)}}
            # A failed renewal is tried again at the next write; the lease is still ours
            # for two more thirds of its duration.
            with suppress(ClusterError):
                self.lease = self._api.replace(fresh)


@contextmanager
def held(
    api: LeaseAPI,
    *,
    instance: str,
    namespace: str,
    holder: str,
    duration_seconds: int = DEFAULT_DURATION_SECONDS,
    now: datetime | None = None,
    clock: Callable[[], datetime] | None = None,
) -> Iterator[HeldLease]:
    """Hold the instance's Lease for the body of the `with`, then release it."""
    held_lease = HeldLease(
        api,
        acquire(
            api,
            instance=instance,
            namespace=namespace,
            holder=holder,
            duration_seconds=duration_seconds,
            now=now,
        ),
        clock,
    )
    try:
        yield held_lease
    finally:
        release(api, held_lease.lease)  # the latest version: renewals moved it on


def acquire(
    api: LeaseAPI,
    *,
    instance: str,
    namespace: str,
    holder: str,
    duration_seconds: int = DEFAULT_DURATION_SECONDS,
    now: datetime | None = None,
) -> KubeObject:
    now = now or datetime.now(UTC)
    ref = lease_ref(instance, namespace)
    current = api.get(ref)
    spec = {
        "holderIdentity": holder,
        "leaseDurationSeconds": duration_seconds,
        "acquireTime": _micro_time(now),
        "renewTime": _micro_time(now),
    }
    try:
        if current is None:
            return api.create_strict(_lease(ref, instance, spec))
        if not is_free(current, now):
            raise LeaseHeldError(describe_holder(current))
        spec["leaseTransitions"] = int(current["spec"].get("leaseTransitions") or 0) + 1
        taken = _lease(ref, instance, spec)
        taken["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return api.replace(taken)
    except ClusterClientError as exc:
        if exc.status == 409:  # another sync created or took it a moment ago
            raise LeaseHeldError(describe_holder(api.get(ref))) from exc
        raise


def release(api: LeaseAPI, lease: KubeObject) -> None:
    """Give the Lease up by clearing its holder, so the next sync need not wait."""
    released = {**lease, "spec": {**lease["spec"], "holderIdentity": None}}
    # A ClusterClientError means someone took over an expired lease of ours; any
    # other failure leaves the lease to expire, and must not hide what the sync did.
    with suppress(ClusterError):
        api.replace(released)


def is_free(lease: Mapping[str, Any], now: datetime) -> bool:
    spec = lease.get("spec") or {}
    if not spec.get("holderIdentity"):
        return True
    renewed = _parse_time(spec.get("renewTime") or spec.get("acquireTime"))
    duration = int(spec.get("leaseDurationSeconds") or DEFAULT_DURATION_SECONDS)
    return renewed is None or renewed + timedelta(seconds=duration) < now


def describe_holder(lease: Mapping[str, Any] | None) -> str:
    spec = (lease or {}).get("spec") or {}
    holder = spec.get("holderIdentity") or "unknown"
    since = spec.get("acquireTime")
    return f"{holder} (since {since})" if since else str(holder)


def _lease(ref: ObjectRef, instance: str, spec: dict[str, Any]) -> KubeObject:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": ref.name,
            "namespace": ref.namespace,
            "labels": ownership_labels(instance),
        },
        "spec": spec,
    }


def _micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
