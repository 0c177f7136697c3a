"""One sync at a time: a coordination.k8s.io/v1 Lease per instance.

The sync takes the Lease only when it is about to write. A second sync that
finds it held by someone else and not expired stops with `LeaseHeldError`
(exit 5) and writes nothing; an expired Lease (its holder died) is taken over.
Creating and replacing with a resourceVersion makes the take-over atomic: of
two syncs racing for the same Lease, the API server lets exactly one win.

A response can be lost after the server acted (a dropped connection): the
client's retry then meets a 409 caused by its own write. So after every 409
the Lease is read again, and a Lease that carries this sync's own holder and
acquire time is recognised as ours, not blamed on another sync. A Lease without
`spec` is read as kube-apiserver serves it, an empty spec: nobody holds it. One
that cannot be read (a spec that is not a mapping, a duration that is not a
whole number) is reported as damaged with how to repair it (`StateDamagedError`),
never guessed at.

The Lease also tells the next holder whether it was handed over cleanly: a holder
stopped with writes its hand-off record (`handoff.py`) does not show releases it
marked `UNRECORDED`, and one that died leaves it to expire; the next holder then
reads the cluster again.

A holder that dies (its pod OOM-killed, or its API server gone when it wanted to
release) must not lock the next syncs out for long, so the Lease is short, as
Kubernetes' own leader election's (kube-scheduler's `--leader-elect-lease-duration`,
15 s): the holder renews it from a thread of its own once a third of its duration
has passed, and if no renewal went through for two thirds of it (the renew
deadline), it stops writing (`Fence`): every write after that, in flight or not, is
cut off before the Lease can expire and be taken over, so two syncs never write at
once; the sync then ends with `LeaseLostError`. The last third is the margin for
the clocks of the holder and of the next taker, which compare `renewTime` with
their own.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, Protocol

from mxgitops.errors import (
    ClusterClientError,
    ClusterError,
    LeaseHeldError,
    LeaseLostError,
    StateDamagedError,
)
from mxgitops.kube.clustertext import said
from mxgitops.objects import Kind, KubeObject, ObjectRef, ownership_labels

DEFAULT_DURATION_SECONDS = 15
# A Lease that states no duration (none that mxgitops writes) is held as long as the
# longest any version of mxgitops held one.
UNSTATED_DURATION_SECONDS = 600
MAX_HOLDER_SHOWN = 253  # characters of a holder's name said (a pod's name is at most that)
RENEW_TICK = 1.0  # seconds between the renewing thread's looks at the Lease
RENEW_DEADLINE_SHARE = 2 / 3  # of the duration: no renewal by then, no further write
# On a released Lease: its holder may have written more than the hand-off record says.
UNRECORDED = "mxgitops.io/writes-unrecorded"
log = logging.getLogger("mxgitops")


class LeaseAPI(Protocol):
    def get(self, ref: ObjectRef) -> KubeObject | None: ...

    def create_strict(self, obj: KubeObject) -> KubeObject: ...

    def replace(self, obj: KubeObject) -> KubeObject: ...


def default_holder() -> str:
    """Who is syncing: the pod name in a cluster (HOSTNAME), else host and pid."""
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}/{os.getpid()}"


def lease_ref(instance: str, namespace: str) -> ObjectRef:
    return ObjectRef(Kind.LEASE, namespace, f"mxgitops-{instance}")


class Fence:
    """Until when the holder of a Lease may send writes (`time.monotonic()`): two thirds
    of the Lease's duration after its last renewal was sent. The writes of
    `kubecalls.Calls` are cut off there, in flight or not; unset while no Lease is held."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._until: float | None = None
        self._within = 0.0
        self._what = ""
        self._releaser: int | None = None  # the thread sending the release
        self.why = ""  # the last renewal's failure

    def hold(self, since: float, within: float, what: str) -> None:
        """`what` taken at `since` (when the take was sent): writes for `within`
        seconds, and as long after each renewal (`renewed`)."""
        self._until, self._within, self._what, self.why = since + within, within, what, ""

    def renewed(self, since: float) -> None:
        if self._until is not None:
            self._until, self.why = max(self._until, since + self._within), ""

    def cut(self, why: str) -> None:
        """No further write at all: the Lease is another's."""
        if self._until is not None:
            self._until, self.why = -math.inf, why

    @contextmanager
    def releasing(self) -> Iterator[None]:
        """The release, the one write a holder past its deadline still sends: no limit
        on this thread in the `with`. Then the fence is lifted, unless the deadline
        passed: a write of another thread that waited past it (a renewal whose
        credentials came late) stays cut off, and the sync ends."""
        self._releaser = threading.get_ident()
        try:
            yield
        finally:
            self._releaser = None
            if self._until is not None and self._until > self.clock():
                self._until = None

    def left(self) -> float | None:
        """Seconds left for writes, None when no Lease is held (no limit)."""
        if self._until is None or self._releaser == threading.get_ident():
            return None
        return self._until - self.clock()

    def lost(self) -> LeaseLostError:
        why = f" ({self.why})" if self.why else ""
        return LeaseLostError(
            f"lost {self._what}: not renewed within {self._within:g} s{why}; no write was "
            "sent after that (another sync may take the Lease over): the next sync "
            "finishes the apply"
        )


class HeldLease:
    """The Lease while this sync holds it, renewed as it goes (`renew_if_due`; from a
    thread of its own once `renew_in_background` is called), so that it does not
    expire (and get taken over) while writes still run.

    With a `Fence`, a renewal moves the fence on, and a renewal that did not go
    through by the renew deadline stops the writes: `lost` is then set.

    `handed_over` says whether the previous holder released it with its writes
    recorded (`handoff.py`), or nobody held it before; `writes_unrecorded` is set
    by the holder while it has writes the record does not yet show, and makes the
    release say so."""

    def __init__(
        self,
        api: LeaseAPI,
        lease: KubeObject,
        clock: Callable[[], datetime] | None = None,
        *,
        handed_over: bool = True,
        fence: Fence | None = None,
    ) -> None:
        self._api = api
        self.lease = lease
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.Lock()  # writes finish on several threads
        self._fence = fence
        self._done = threading.Event()
        self.released = False
        self.handed_over = handed_over
        self.writes_unrecorded = False

    @property
    def lost(self) -> bool:
        """Whether its renew deadline passed: no write may follow."""
        left = self._fence.left() if self._fence is not None else None
        return left is not None and left <= 0

    def raise_if_lost(self) -> None:
        if self.lost and self._fence is not None:
            raise self._fence.lost()

    def renew_in_background(self) -> None:
        """Renew from a daemon thread until released, whatever the sync's main thread
        waits on (a LIST, a write, old pods going)."""

        def renewing() -> None:
            while not self._done.wait(RENEW_TICK) and not self.lost:
                self.renew_if_due()

        threading.Thread(target=renewing, name="mxgitops-lease", daemon=True).start()

    def renew_if_due(self) -> None:
        """Renew once a third of the lease's duration has passed since the last renewal."""
        with self._lock:
            if self.released or self.lost:
                return
            spec = self.lease["spec"]
            now = self._clock()
            renewed = _parse_time(spec.get("renewTime"))
            period = timedelta(seconds=int(spec["leaseDurationSeconds"]) / 3)
            if renewed is not None and now < renewed + period:
                return
            fresh = {**self.lease, "spec": {**spec, "renewTime": micro_time(now)}}
            sent = self._fence.clock() if self._fence is not None else 0.0
            try:
                self.lease = _write(self._api, self._api.replace, fresh)
            except ClusterError as exc:
                # Tried again at the next look, until the renew deadline.
                self._renewal_failed(exc)
                return
            if self._fence is not None:
                self._fence.renewed(sent)

    def _renewal_failed(self, error: ClusterError) -> None:
        if self._fence is None or isinstance(error, LeaseLostError):
            return
        if isinstance(error, ClusterClientError) and error.status == 409:
            self._fence.cut("another sync took it over")  # `_write` read it: not ours
        else:
            self._fence.why = str(error)

    def release(self) -> None:
        """Not under the lock: a renewal stuck in a request must not hold up a SIGTERM;
        `release` settles a race with it through the 409. The release is the one write
        a holder past its deadline still sends (`Fence.releasing`)."""
        self.released = True
        self._done.set()
        if self._fence is None:
            release(self._api, self.lease, unrecorded=self.writes_unrecorded)
            return
        with self._fence.releasing():
            release(self._api, self.lease, unrecorded=self.writes_unrecorded)


@contextmanager
def held(
    api: LeaseAPI,
    *,
    instance: str,
    namespace: str,
    holder: str,
    duration_seconds: int | None = None,
    now: datetime | None = None,
    clock: Callable[[], datetime] | None = None,
    fence: Fence | None = None,
) -> Iterator[HeldLease]:
    """Hold the instance's Lease (for `duration_seconds`, else `DEFAULT_DURATION_SECONDS`
    as it is when called) for the body of the `with`, then release it. With a `fence`
    (the cluster's), the writes stop at the renew deadline."""
    if duration_seconds is None:
        duration_seconds = DEFAULT_DURATION_SECONDS
    sent = fence.clock() if fence is not None else 0.0
    ref = lease_ref(instance, namespace)
    try:
        taken, handed_over = take(
            api,
            instance=instance,
            namespace=namespace,
            holder=holder,
            duration_seconds=duration_seconds,
            now=now,
        )
    except (SystemExit, KeyboardInterrupt):  # SIGTERM: the take may have gone through
        _give_back(api, ref, holder)
        raise
    if fence is not None:
        what = f"the Lease {ref.namespace}/{ref.name}"
        fence.hold(sent, duration_seconds * RENEW_DEADLINE_SHARE, what)
    held_lease = HeldLease(api, taken, clock, handed_over=handed_over, fence=fence)
    try:
        yield held_lease
    finally:
        held_lease.release()  # the latest version: renewals moved it on


class Taken(NamedTuple):
    lease: KubeObject
    handed_over: bool  # its last holder released it with its writes recorded, or none held it


def take(
    api: LeaseAPI,
    *,
    instance: str,
    namespace: str,
    holder: str,
    duration_seconds: int = DEFAULT_DURATION_SECONDS,
    now: datetime | None = None,
) -> Taken:
    """The Lease, taken, and whether its last holder handed it over cleanly."""
    now = now or datetime.now(UTC)
    ref = lease_ref(instance, namespace)
    current = api.get(ref)
    if current is not None:
        _check(current, ref)
    spec = {
        "holderIdentity": holder,
        "leaseDurationSeconds": duration_seconds,
        "acquireTime": micro_time(now),
        "renewTime": micro_time(now),
    }
    if current is None:
        created = _write(
            api, api.create_strict, _lease(ref, instance, spec), held_by=describe_holder
        )
        return Taken(created, True)
    if not is_free(current, now):
        raise LeaseHeldError(describe_holder(current))
    spec["leaseTransitions"] = int((current.get("spec") or {}).get("leaseTransitions") or 0) + 1
    taken = _lease(ref, instance, spec)
    taken["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    return Taken(_write(api, api.replace, taken, held_by=describe_holder), _handed_over(current))


def _handed_over(found: Mapping[str, Any]) -> bool:
    """Whether a free Lease was released (not left to expire) with its holder's writes
    recorded."""
    released = not _spec(found).get("holderIdentity")
    annotations = (found.get("metadata") or {}).get("annotations") or {}
    return released and UNRECORDED not in annotations


def release(api: LeaseAPI, lease: KubeObject, *, unrecorded: bool = False) -> None:
    """Give the Lease up by clearing its holder, so the next sync need not wait.

    After a 409, a Lease still held by us (a renewal moved it on) is released in
    its newer version; one held by someone else (who took over an expired lease of
    ours) is left alone. Any other failure leaves the lease to expire, and must not
    hide what the sync did."""
    ours = lease
    for _ in range(2):
        released = {**ours, "spec": {**ours["spec"], "holderIdentity": None}}
        if unrecorded:
            metadata = ours["metadata"]
            annotations = {**(metadata.get("annotations") or {}), UNRECORDED: "true"}
            released["metadata"] = {**metadata, "annotations": annotations}
        try:
            api.replace(released)
            return
        except ClusterClientError as exc:
            if exc.status != 409:
                _not_released(ours, exc)
                return
            with suppress(ClusterError):
                current = api.get(ObjectRef.of(lease))
                if current is not None and _holds(current, ours):
                    ours = current
                    continue
            return
        except ClusterError as exc:
            _not_released(ours, exc)
            return


def _not_released(lease: KubeObject, error: ClusterError) -> None:
    """Say why the Lease stays held: the next syncs stop on it until it expires."""
    spec = _spec(lease)
    log.warning(
        "could not release Lease %s: %s; syncs wait until it expires (%ss after its renewal at %s)",
        ObjectRef.of(lease),
        error,
        spec.get("leaseDurationSeconds"),
        spec.get("renewTime"),
    )


def _give_back(api: LeaseAPI, ref: ObjectRef, holder: str) -> None:
    """Release the Lease if a take interrupted before its answer made it ours."""
    with suppress(ClusterError):
        current = api.get(ref)
        if current is not None and _spec(current).get("holderIdentity") == holder:
            release(api, current)


def _write(
    api: LeaseAPI,
    send: Callable[[KubeObject], KubeObject],
    lease: KubeObject,
    *,
    held_by: Callable[[KubeObject | None], str] | None = None,
) -> KubeObject:
    """Create or replace the Lease; after a 409, read it: if it now says exactly what
    we sent, the 409 answered the retry of our own write, whose response was lost.
    Otherwise another sync got there first (LeaseHeldError if `held_by` names it)."""
    try:
        return send(lease)
    except ClusterClientError as exc:
        if exc.status != 409:
            raise
        current = api.get(ObjectRef.of(lease))
        if current is not None and _spec(current) == _spec(lease):
            return current
        if held_by is None:
            raise
        raise LeaseHeldError(held_by(current)) from exc


def _spec(lease: Mapping[str, Any]) -> dict[str, Any]:
    """The spec as the API server stores it: unset fields are left out."""
    return {k: v for k, v in (lease.get("spec") or {}).items() if v is not None}


def _holds(current: Mapping[str, Any], ours: Mapping[str, Any]) -> bool:
    """Whether `current` is still held by the holder of `ours`, since the same take."""
    mine, now = _spec(ours), _spec(current)
    keys = ("holderIdentity", "acquireTime")
    return bool(now.get("holderIdentity")) and all(now.get(k) == mine.get(k) for k in keys)


def _check(lease: KubeObject, ref: ObjectRef) -> None:
    """A Lease this module cannot read is reported, with how to repair it."""
    spec = lease.get("spec") or {}
    problem = None
    if not isinstance(spec, dict):
        problem = "its spec is not a mapping"
    else:
        for key in ("leaseDurationSeconds", "leaseTransitions"):
            value = spec.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                problem = f"spec.{key} is {value!r}, not a whole number"
    if problem is not None:
        raise StateDamagedError(
            f"the Lease {ref.namespace}/{ref.name} is damaged ({problem}); when no sync is "
            f"running, delete it (kubectl -n {ref.namespace} delete lease {ref.name}) and "
            "the next sync creates it again"
        )


def is_free(lease: Mapping[str, Any], now: datetime) -> bool:
    spec = lease.get("spec") or {}
    if not spec.get("holderIdentity"):
        return True
    renewed = _parse_time(spec.get("renewTime") or spec.get("acquireTime"))
    duration = int(spec.get("leaseDurationSeconds") or UNSTATED_DURATION_SECONDS)
    return renewed is None or renewed + timedelta(seconds=duration) < now


def describe_holder(lease: Mapping[str, Any] | None) -> str:
    """Who holds `lease`, as it says: bounded and on one line (anyone who may edit the
    namespace may write it)."""
    spec = (lease or {}).get("spec") or {}
    if not isinstance(spec, Mapping):
        spec = {}
    holder = said(str(spec.get("holderIdentity") or "unknown"), MAX_HOLDER_SHOWN)
    since = said(str(spec.get("acquireTime") or ""), 40)
    return f"{holder} (since {since})" if since else holder


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


def micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
