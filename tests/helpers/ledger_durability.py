"""Helpers of `tests/e2e/test_ledger_durability.py` that other test modules use too."""

from __future__ import annotations

from tests.helpers.reconcile_e2e import (
    NS,
)

ROW = {
    "namespace": NS,
    "name": "once",
    "spec_hash": "h",
    "state": "Succeeded",
    "finished_at": "2026-01-01T00:00:00+00:00",
}
