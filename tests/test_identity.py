"""Who a live object belongs to: runtime ids, and identity that survives hand edits.

A runtime id names every object of one runtime of a job; it must spread the
spec hash's bits over all its characters, so that a changed spec almost never
keeps the old names. Live objects are recognised by more than the one
hand-editable `mxgitops.io/job` label: name, runtime id and spec hash must add up.
"""

from __future__ import annotations

from collections import Counter

from mxgitops.spec import RUNTIME_ID_LENGTH, from_manifest

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def local_job(name: str) -> dict[str, object]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name},
        "spec": {
            "mxReplicaSpecs": {
                "Worker": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "mxnet", "image": "m"}]}},
                }
            }
        },
    }


def test_runtime_ids_use_every_character_at_every_position() -> None:
    ids = [from_manifest(local_job(f"job-{i}")).runtime_id for i in range(3600)]
    assert all(len(i) == RUNTIME_ID_LENGTH and set(i) <= set(ALPHABET) for i in ids)
    for position in range(RUNTIME_ID_LENGTH):
        counts = Counter(i[position] for i in ids)
        # 3,600 draws over 36 characters: about 100 each; a uniform encoding never
        # leaves one under 50 or over 160 (today's leading digit is 1-3, nearly always).
        assert set(counts) == set(ALPHABET), (position, sorted(counts))
        assert min(counts.values()) > 50 and max(counts.values()) < 160, (position, counts)
