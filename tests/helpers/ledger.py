"""The ledger in tests: one shard written or read, as a small ledger is stored.

The product reads and writes every shard at once (`state/ledgerstore.py`); a test of a
ledger that fits in one ConfigMap looks at that one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxgitops.objects import KubeObject
from mxgitops.planning.ledger import Ledger
from mxgitops.state import ledgerstore


def first_shard(book: Ledger, *, instance: str, namespace: str) -> KubeObject:
    """The first shard `book` is written as (all of a ledger that fits in one)."""
    return ledgerstore.to_config_maps(book, instance=instance, namespace=namespace)[0]


def read_shard(obj: Mapping[str, Any] | None) -> Ledger:
    """The ledger held by one shard; None (no ConfigMap) holds the empty ledger."""
    return ledgerstore.from_config_maps([obj] if obj is not None else [])
