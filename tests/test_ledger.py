"""ledger: the ConfigMap of finished (job, spec hash) pairs, encoded, decoded and capped."""

from __future__ import annotations

import json

import pytest

from mxgitops import ledger
from mxgitops.ledger import DATA_KEY, Finished, Ledger
from mxgitops.objects import ObjectRef, ownership_labels

A = Finished("ml", "a", "h1", "Succeeded", "2026-01-01T00:00:00+00:00")
B = Finished("ml", "b", "h2", "Failed", "2026-01-02T00:00:00+00:00")


def test_round_trip_through_the_config_map() -> None:
    book = Ledger({A.key: A, B.key: B}, resource_version="41")
    obj = ledger.to_config_map(book, instance="t1", namespace="ml")
    assert ObjectRef.of(obj) == ledger.config_map_ref("t1", "ml")
    assert obj["metadata"]["name"] == "mxgitops-ledger-t1"
    assert obj["metadata"]["labels"] == ownership_labels("t1")
    assert obj["metadata"]["resourceVersion"] == "41"
    assert ledger.from_config_map(obj) == book


def test_a_new_ledger_has_no_resource_version() -> None:
    assert ledger.from_config_map(None) == Ledger()
    obj = ledger.to_config_map(Ledger(), instance="t1", namespace="ml")
    assert "resourceVersion" not in obj["metadata"]
    assert obj["data"] == {DATA_KEY: "[]"}
    empty = {"metadata": {"name": "x", "resourceVersion": "3"}}
    assert ledger.from_config_map(empty) == Ledger({}, "3")


def test_encoding_is_deterministic_newest_first() -> None:
    one = ledger.to_config_map(Ledger({A.key: A, B.key: B}), instance="t1", namespace="ml")
    two = ledger.to_config_map(Ledger({B.key: B, A.key: A}), instance="t1", namespace="ml")
    assert one == two
    assert [row["name"] for row in json.loads(one["data"][DATA_KEY])] == ["b", "a"]


def test_finished_matches_the_spec_hash_only() -> None:
    book = Ledger({A.key: A})
    assert book.finished(("ml", "a"), "h1") == A
    assert book.finished(("ml", "a"), "other") is None
    assert book.finished(("ml", "zz"), "h1") is None


def test_updated_adds_records_and_forgets_the_rest() -> None:
    book = Ledger({A.key: A, B.key: B}, "7")
    newer = Finished("ml", "a", "h9", "Failed", "2026-02-01T00:00:00+00:00")
    updated = book.updated([newer], keep={("ml", "a")})
    assert updated.entries == {("ml", "a"): newer}
    assert updated.resource_version == "7"
    assert book.entries == {A.key: A, B.key: B}  # a new value, the old one unchanged


@pytest.mark.parametrize("cap", [2_000, ledger.MAX_BYTES])
def test_size_cap_drops_the_oldest_entries(monkeypatch: pytest.MonkeyPatch, cap: int) -> None:
    monkeypatch.setattr(ledger, "MAX_BYTES", cap)
    count = cap // 100 + 50  # each entry is over 100 bytes: well over the cap
    entries = {
        ("ml", f"job-{i:05d}"): Finished(
            "ml", f"job-{i:05d}", f"{i:064x}", "Succeeded", f"2026-01-01T00:00:{i % 60:02d}+{i:05d}"
        )
        for i in range(count)
    }
    obj = ledger.to_config_map(Ledger(entries), instance="t1", namespace="ml")
    text = obj["data"][DATA_KEY]
    assert len(text.encode()) <= cap
    kept = ledger.from_config_map(obj).entries
    assert 0 < len(kept) < count
    newest = sorted(entries.values(), key=lambda e: (e.finished_at, e.key), reverse=True)
    assert set(kept) == {e.key for e in newest[: len(kept)]}
