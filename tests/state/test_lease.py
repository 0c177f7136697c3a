"""lease: one sync at a time, against a tiny in-memory fake of the Lease API."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mxgitops.errors import ClusterServerError, LeaseHeldError, LeaseLostError
from mxgitops.kube import lease
from mxgitops.objects import KubeObject, ObjectRef
from tests.helpers.lease import REF, FakeLeases

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def take(api: FakeLeases, holder: str = "me/1") -> KubeObject:
    return lease.take(api, instance="t1", namespace="ml", holder=holder, now=NOW).lease


def test_acquire_creates_a_missing_lease() -> None:
    api = FakeLeases()
    got = take(api)
    assert api.writes == ["create"]
    assert got["metadata"]["name"] == "mxgitops-t1"
    assert got["metadata"]["labels"]["mxgitops.io/instance"] == "t1"
    assert got["spec"]["holderIdentity"] == "me/1"
    assert got["spec"]["leaseDurationSeconds"] == lease.DEFAULT_DURATION_SECONDS
    assert got["spec"]["renewTime"] == "2026-03-01T12:00:00.000000Z"


def test_a_fresh_lease_of_another_holder_is_refused_without_a_write() -> None:
    api = FakeLeases()
    api.put("cron-x/9", NOW - timedelta(seconds=30))
    with pytest.raises(LeaseHeldError, match="cron-x/9") as caught:
        take(api)
    assert caught.value.holder.startswith("cron-x/9 (since 2026-03-01T11:59:30")
    assert api.writes == []


@pytest.mark.parametrize("holder", [None, "", "dead/1"])
def test_a_released_or_expired_lease_is_taken_over(holder: str | None) -> None:
    api = FakeLeases()
    api.put(holder, NOW - timedelta(seconds=61))
    got = take(api)
    assert api.writes == ["replace"]
    assert (got["spec"]["holderIdentity"], got["spec"]["leaseTransitions"]) == ("me/1", 1)


def test_losing_a_race_is_reported_as_held() -> None:
    api = FakeLeases()

    class Racing(FakeLeases):
        def get(self, ref: ObjectRef) -> KubeObject | None:
            found = api.get(ref)
            if found is None:  # someone else creates it between our GET and our create
                api.put("fast/2", NOW)
            return found

        def create_strict(self, obj: KubeObject) -> KubeObject:
            return api.create_strict(obj)

    with pytest.raises(LeaseHeldError, match="fast/2"):
        take(Racing())


def test_release_clears_the_holder_and_tolerates_failures() -> None:
    api = FakeLeases()
    got = take(api)
    lease.release(api, got)
    stored = api.get(REF)
    assert stored is not None and stored["spec"]["holderIdentity"] is None
    assert lease.is_free(stored, NOW)
    lease.release(api, got)  # stale resourceVersion: someone took it over; not an error
    again = take(api)
    api.fail_replace = ClusterServerError("down", status=503)
    lease.release(api, again)  # the lease is left to expire; the sync's outcome stands


def test_held_releases_even_when_the_body_fails() -> None:
    api = FakeLeases()
    with (
        pytest.raises(RuntimeError),
        lease.held(api, instance="t1", namespace="ml", holder="me/1", now=NOW) as got,
    ):
        assert got.lease["spec"]["holderIdentity"] == "me/1"
        raise RuntimeError("apply blew up")
    stored = api.get(REF)
    assert stored is not None and stored["spec"]["holderIdentity"] is None


@pytest.mark.parametrize(
    ("spec", "free"),
    [
        ({}, True),
        ({"holderIdentity": "x", "renewTime": "2026-03-01T11:59:00.000000Z"}, False),
        ({"holderIdentity": "x", "renewTime": "2026-03-01T11:51:00.000000Z"}, False),
        (
            {
                "holderIdentity": "x",
                "renewTime": "2026-03-01T11:49:59.000000Z",
                "leaseDurationSeconds": 600,
            },
            True,
        ),
        (
            {
                "holderIdentity": "x",
                "acquireTime": "2026-03-01T11:59:00Z",
                "leaseDurationSeconds": 30,
            },
            True,
        ),
        ({"holderIdentity": "x"}, True),
        ({"holderIdentity": "x", "renewTime": "yesterday"}, True),
    ],
)
def test_is_free(spec: dict[str, Any], free: bool) -> None:
    assert lease.is_free({"spec": spec}, NOW) is free


def test_describe_holder() -> None:
    assert lease.describe_holder(None) == "unknown"
    assert lease.describe_holder({"spec": {"holderIdentity": "a"}}) == "a"
    spec = {"holderIdentity": "a", "acquireTime": "t"}
    assert lease.describe_holder({"spec": spec}) == "a (since t)"


def test_a_long_apply_renews_the_lease_and_releases_the_renewed_one() -> None:
    api, clock = FakeLeases(), [NOW]
    with lease.held(
        api,
        instance="t1",
        namespace="ml",
        holder="me/1",
        duration_seconds=60,
        now=NOW,
        clock=lambda: clock[0],
    ) as got:
        clock[0] = NOW + timedelta(seconds=19)
        got.renew_if_due()
        assert api.writes == ["create"]  # not due before a third of the duration
        clock[0] = NOW + timedelta(seconds=21)
        got.renew_if_due()
        stored = api.get(REF)
        assert stored is not None and stored["spec"]["renewTime"].startswith("2026-03-01T12:00:21")
        assert not lease.is_free(stored, NOW + timedelta(seconds=70))
        api.fail_replace = ClusterServerError("down", status=503)
        clock[0] = NOW + timedelta(seconds=42)
        got.renew_if_due()  # a failed renewal does not end the sync
        api.fail_replace = None
    stored = api.get(REF)
    assert stored is not None and stored["spec"]["holderIdentity"] is None  # released


def test_a_lease_that_cannot_be_released_says_why(caplog: pytest.LogCaptureFixture) -> None:
    """A release refused (RBAC without update, found by the real authorizer) is not
    silent: the next syncs stop on this Lease until it expires, and the log says why."""
    from mxgitops.errors import ClusterForbidden

    api = FakeLeases()
    taken = lease.take(api, instance="t1", namespace="ml", holder="me", now=NOW).lease
    api.fail_replace = ClusterForbidden("the Kubernetes API refused PUT leases: forbidden")
    with caplog.at_level("WARNING", logger="mxgitops"):
        lease.release(api, taken)
    (record,) = caplog.records
    assert record.getMessage().startswith("could not release Lease lease/mxgitops-t1 in ml")
    duration = f"{lease.DEFAULT_DURATION_SECONDS}s"
    assert "forbidden" in record.getMessage() and duration in record.getMessage()


class FakeMonotonic:
    """The fence's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_writes_are_fenced_at_the_renew_deadline_and_a_renewal_moves_it_on() -> None:
    """Two thirds of the duration after the take was sent, with no renewal through, the
    holder is past its deadline: it may send no further write (`lost`), a third of the
    duration before another sync may take the Lease over."""
    api, clock, mono = FakeLeases(), [NOW], FakeMonotonic()
    fence = lease.Fence(mono)
    assert fence.left() is None  # no Lease held: no limit
    with lease.held(
        api,
        instance="t1",
        namespace="ml",
        holder="me/1",
        duration_seconds=15,
        now=NOW,
        clock=lambda: clock[0],
        fence=fence,
    ) as got:
        assert fence.left() == 10.0 and not got.lost
        clock[0], mono.now = NOW + timedelta(seconds=6), 106.0
        got.renew_if_due()  # sent at 106: fenced until 116
        assert fence.left() == 10.0
        api.fail_replace = ClusterServerError("the Kubernetes API failed PUT", status=503)
        clock[0], mono.now = NOW + timedelta(seconds=12), 112.0
        got.renew_if_due()
        assert fence.left() == 4.0 and not got.lost  # one failure: still ours
        mono.now = 116.0
        assert got.lost
        with pytest.raises(LeaseLostError, match=r"lost the Lease ml/mxgitops-t1: not renewed "):
            got.raise_if_lost()
        api.fail_replace = None
        got.renew_if_due()  # lost is final: no renewal after the deadline
        assert api.writes == ["create", "replace", "replace"]
    # The release went, the one write past the deadline; no other write of the sync may.
    left = fence.left()
    assert left is not None and left <= 0
    stored = api.get(REF)
    assert stored is not None and stored["spec"]["holderIdentity"] is None


def test_a_lease_taken_over_stops_the_writes_at_once() -> None:
    api, clock, mono = FakeLeases(), [NOW], FakeMonotonic()
    fence = lease.Fence(mono)
    with lease.held(
        api,
        instance="t1",
        namespace="ml",
        holder="me/1",
        now=NOW,
        clock=lambda: clock[0],
        fence=fence,
    ) as got:
        api.put("other/2", NOW)  # another sync's, as if ours had expired
        clock[0] = NOW + timedelta(seconds=6)
        got.renew_if_due()
        assert got.lost
        with pytest.raises(LeaseLostError, match="another sync took it over"):
            got.raise_if_lost()


def test_the_holder_renews_from_a_thread_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the sync's main thread waits on, the Lease is renewed."""
    monkeypatch.setattr(lease, "RENEW_TICK", 0.01)
    api = FakeLeases()
    with lease.held(
        api, instance="t1", namespace="ml", holder="me/1", duration_seconds=1, fence=lease.Fence()
    ) as got:
        got.renew_in_background()  # due a third of a second after each renewal
        deadline = time.monotonic() + 30
        while api.writes.count("replace") < 2:
            assert time.monotonic() < deadline, api.writes
            time.sleep(0.01)  # the renewing thread is what this waits on
    assert api.writes[-1] == "replace"  # the release, after the thread stopped
