"""`specchange.spec_change`: how a job's manifest differs from its previous run's."""

from __future__ import annotations

from typing import Any

import yaml

from mxgitops.commands.specchange import MAX_LINES, spec_change
from tests.helpers.history import manifest


def _doc(name: str = "mnist", lr: str = "0.1", **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(manifest(name, lr, **extra))
    return doc


def test_a_flag_s_value_is_shown_after_its_flag() -> None:
    assert spec_change(_doc(lr="0.1"), _doc(lr="0.05")) == ("args: --lr 0.1 → 0.05",)


def test_a_new_job_and_an_unchanged_one() -> None:
    assert spec_change(None, _doc()) == ("new job",)
    assert spec_change(_doc(), _doc()) == ("no change to the spec",)


def test_scalars_added_and_fields_named_by_their_key() -> None:
    before, after = _doc(), _doc()
    after["spec"]["mxReplicaSpecs"]["Worker"]["replicas"] = 2
    after["spec"]["runPolicy"] = {"backoffLimit": 3}
    assert spec_change(before, after) == ("replicas: 1 → 2", "backoffLimit: (none) → 3")


def test_the_same_change_in_every_replica_type_is_one_line() -> None:
    before, after = _doc(), _doc()
    for doc, image in ((before, "a:1"), (after, "a:2")):
        worker = doc["spec"]["mxReplicaSpecs"]["Worker"]
        doc["spec"]["mxReplicaSpecs"]["Server"] = yaml.safe_load(yaml.safe_dump(worker))
        for replica in doc["spec"]["mxReplicaSpecs"].values():
            replica["template"]["spec"]["containers"][0]["image"] = image
    assert spec_change(before, after) == ("image: a:1 → a:2",)
    after["spec"]["mxReplicaSpecs"]["Server"]["replicas"] = 3
    assert spec_change(before, after) == ("Server replicas: 1 → 3", "image: a:1 → a:2")


def test_hostile_manifests_give_bounded_lines() -> None:
    before, after = _doc(), _doc()
    after["metadata"]["annotations"] = {f"k{n}": "v" * 10_000 for n in range(50)}
    lines = spec_change(before, after)
    assert len(lines) == MAX_LINES
    assert lines[-1] == f"and {50 - MAX_LINES + 1} more changes"
    assert all(len(line) < 200 for line in lines)
