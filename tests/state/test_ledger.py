"""ledger: the ConfigMap of finished (job, spec hash) pairs, encoded, decoded and capped."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mxgitops.objects import Kind, ObjectRef, ownership_labels
from mxgitops.planning import ledger
from mxgitops.planning.ledger import Finished, Ledger
from mxgitops.state import ledgerstore
from mxgitops.state.ledgerstore import DATA_KEY
from tests.helpers.sync import first_shard, read_shard

A = Finished("ml", "a", "h1", "Succeeded", "2026-01-01T00:00:00+00:00")
B = Finished("ml", "b", "h2", "Failed", "2026-01-02T00:00:00+00:00")


def test_round_trip_through_the_config_map() -> None:
    book = Ledger({A.key: A, B.key: B})
    obj = first_shard(book, instance="t1", namespace="ml")
    assert ObjectRef.of(obj) == ObjectRef(Kind.CONFIG_MAP, "ml", ledgerstore.shard_name("t1", 0))
    assert obj["metadata"]["name"] == "mxgitops-ledger-t1"
    assert obj["metadata"]["labels"] == ownership_labels("t1")
    assert "resourceVersion" not in obj["metadata"]
    obj["metadata"]["resourceVersion"] = "41"
    read = read_shard(obj)
    assert read.entries == book.entries
    assert read.stored == (ledger.Stored("mxgitops-ledger-t1", "41", obj["data"][DATA_KEY]),)


def test_a_new_ledger_has_nothing_stored() -> None:
    assert read_shard(None) == Ledger()
    obj = first_shard(Ledger(), instance="t1", namespace="ml")
    assert obj["data"] == {DATA_KEY: "[]"}
    empty = {"metadata": {"name": "x", "resourceVersion": "3"}}
    assert read_shard(empty) == Ledger({}, (ledger.Stored("x", "3", ""),))


def test_encoding_is_deterministic_newest_first() -> None:
    one = first_shard(Ledger({A.key: A, B.key: B}), instance="t1", namespace="ml")
    two = first_shard(Ledger({B.key: B, A.key: A}), instance="t1", namespace="ml")
    assert one == two
    assert [row["name"] for row in json.loads(one["data"][DATA_KEY])] == ["b", "a"]


def test_finished_matches_the_spec_hash_only() -> None:
    book = Ledger({A.key: A})
    assert book.finished(("ml", "a"), "h1") == A
    assert book.finished(("ml", "a"), "other") is None
    assert book.finished(("ml", "zz"), "h1") is None


def test_an_unseen_mark_round_trips_and_is_left_out_when_unset() -> None:
    marked = Finished("ml", "a", "h1", "Succeeded", "2026-01-01T00:00:00+00:00", "2026-02-01")
    obj = first_shard(Ledger({A.key: marked}), instance="t1", namespace="ml")
    assert read_shard(obj).entries == {A.key: marked}
    plain = first_shard(Ledger({A.key: A}), instance="t1", namespace="ml")
    assert "unseen_since" not in plain["data"][DATA_KEY]


@pytest.mark.parametrize("cap", [2_000, ledgerstore.MAX_BYTES])
def test_past_the_size_cap_entries_spread_over_shards_and_none_is_dropped(
    monkeypatch: pytest.MonkeyPatch, cap: int
) -> None:
    monkeypatch.setattr(ledgerstore, "MAX_BYTES", cap)
    count = cap // 100 + 50  # each entry is over 100 bytes: well over the cap
    entries = {
        ("ml", f"job-{i:05d}"): Finished(
            "ml", f"job-{i:05d}", f"{i:064x}", "Succeeded", f"2026-01-01T00:00:{i % 60:02d}+00:00"
        )
        for i in range(count)
    }
    objs = ledgerstore.to_config_maps(Ledger(entries), instance="t1", namespace="ml")
    assert len(objs) > 1
    assert all(len(o["data"][DATA_KEY].encode()) <= cap for o in objs)
    assert ledgerstore.from_config_maps(objs).entries == entries


def test_shard_names_belong_to_one_instance() -> None:
    assert ledgerstore.is_shard("mxgitops-ledger-t1", "t1")
    assert ledgerstore.is_shard("mxgitops-ledger-t1.7", "t1")
    assert not ledgerstore.is_shard("mxgitops-ledger-t1.07", "t1")
    assert not ledgerstore.is_shard("mxgitops-ledger-t1-7", "t1")  # shard 0 of instance t1-7
    assert not ledgerstore.is_shard("mxgitops-ledger-t10", "t1")


# -- the record of runtimes, in the first shard ----------------------------------------


def test_the_record_of_runtimes_is_kept_in_the_first_shard_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ledgerstore, "MAX_BYTES", 4 * 1024)
    rows = {
        (f"ns{i}", "j"): Finished(f"ns{i}", "j", "h", "Succeeded", "2026-01-01T00:00:00+00:00")
        for i in range(100)
    }
    book = Ledger(rows, runtimes=frozenset({"jobset", "batch"}))
    shards = ledgerstore.to_config_maps(book, instance="t1", namespace="ml")
    assert len(shards) > 1
    assert [ledgerstore.RUNTIMES_KEY in s["data"] for s in shards] == [True] + [False] * (
        len(shards) - 1
    )
    assert shards[0]["data"][ledgerstore.RUNTIMES_KEY] == "batch,jobset"
    read = ledgerstore.from_config_maps(shards)
    assert read.runtimes == {"batch", "jobset"} and read.entries == rows and not read.unreadable
    # Another shard that says something is not the record.
    shards[1]["data"][ledgerstore.RUNTIMES_KEY] = "batch"
    assert ledgerstore.from_config_maps(shards).runtimes == {"batch", "jobset"}


def test_no_record_of_runtimes_is_none_and_so_is_an_unreadable_one() -> None:
    (plain,) = ledgerstore.to_config_maps(Ledger(), instance="t1", namespace="ml")
    assert ledgerstore.RUNTIMES_KEY not in plain["data"]  # a ledger that does not say
    assert ledgerstore.from_config_maps([plain]).runtimes is None
    assert ledgerstore.from_config_maps([]).runtimes is None
    plain["data"][ledgerstore.RUNTIMES_KEY] = "batch, jobset"
    damaged = ledgerstore.from_config_maps([plain])
    assert damaged.runtimes is None
    assert damaged.unreadable.startswith("the ledger ConfigMap ml/mxgitops-ledger-t1 has ")
    assert "'batch, jobset'" in damaged.unreadable


def test_a_changed_record_of_runtimes_alone_is_written_and_versions_are_kept() -> None:
    class API:
        def __init__(self) -> None:
            self.sent: list[tuple[str, dict[str, str]]] = []

        def get(self, ref: ObjectRef) -> None:
            return None

        def create_strict(self, obj: dict[str, Any]) -> dict[str, Any]:
            self.sent.append(("create", dict(obj["data"])))
            return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "1"}}

        def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
            assert obj["metadata"]["resourceVersion"] == str(len(self.sent))
            self.sent.append(("replace", dict(obj["data"])))
            return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "2"}}

    api = API()
    first = ledgerstore.save(
        api, Ledger(runtimes=frozenset({"batch", "jobset"})), instance="t1", namespace="ml"
    )
    again = ledgerstore.save(api, first, instance="t1", namespace="ml")  # nothing changed
    narrowed = ledgerstore.save(
        api, first.with_runtimes(frozenset({"batch"})), instance="t1", namespace="ml"
    )
    assert api.sent == [
        ("create", {DATA_KEY: "[]", ledgerstore.RUNTIMES_KEY: "batch,jobset"}),
        ("replace", {DATA_KEY: "[]", ledgerstore.RUNTIMES_KEY: "batch"}),
    ]
    assert again == first and narrowed.stored[0].resource_version == "2"
