"""Helpers of `tests/state/test_noop_requests.py` that other test modules use too."""

from __future__ import annotations

from mxgitops.state import ledgerstore
from tests.helpers.reconcile_e2e import (
    INSTANCE,
    NS,
)
from tests.kubeapi.harness import KubeAPI

LEDGER = ledgerstore.shard_name(INSTANCE, 0)


def recorded(api: KubeAPI) -> str | None:
    """The first ledger shard's record of runtimes (None: no such key)."""
    found = api.get("ConfigMap", LEDGER, NS)
    assert found is not None, "no ledger"
    value: str | None = (found.get("data") or {}).get(ledgerstore.RUNTIMES_KEY)
    return value
