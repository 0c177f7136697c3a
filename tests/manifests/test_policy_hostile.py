"""What a pull request can slip past validate (issue 37): a priority for Kueue past
allowedPriorityClasses, a queue name Kubernetes will not take, label keys of JobSet
and Kueue in a pod template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.policy import checked, manifest


def test_scheduling_policys_priority_class_is_held_to_allowed_priority_classes(
    tmp_path: Path,
) -> None:
    """Each pod names an allowed class, and schedulingPolicy.priorityClass another: the
    one Kueue is given (its priority-class label, where a WorkloadPriorityClass of that
    name exists), which render cannot show (it asks no cluster)."""
    doc = yaml.safe_load(manifest("kubeflow", pod={"priorityClassName": "batch-low"}))
    doc["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "q", "priorityClass": "vip"}}
    operator = {"allowedPriorityClasses": ["batch-low"]}
    result = checked(tmp_path, yaml.safe_dump(doc), operator, {})
    assert not result.jobs
    [problem] = result.problems
    assert "allowedPriorityClasses" in str(problem) and "vip" in str(problem), str(problem)
    assert "schedulingPolicy.priorityClass" in str(problem)


def test_a_queue_name_past_63_characters_is_refused_by_validate(tmp_path: Path) -> None:
    """A queue name is the value of Kueue's queue-name label: at most 63 characters, or
    every sync's create of the JobSet is refused (422), and validate said nothing."""
    for queue in ("q" * 64, "a" + "-b" * 40):
        doc = yaml.safe_load(manifest("kubeflow"))
        doc["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": queue}}
        result = checked(tmp_path, yaml.safe_dump(doc), {}, {})
        assert not result.jobs
        [problem] = result.problems
        assert "schedulingPolicy.queue" in str(problem) and "63 characters" in str(problem)
    doc["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "q" * 63}}
    assert checked(tmp_path, yaml.safe_dump(doc), {}, {}).jobs


@pytest.mark.parametrize(
    "key",
    ["jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name",
     "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/podset"],
)  # fmt: skip
@pytest.mark.parametrize("dialect", ["seed", "kubeflow"])
def test_jobset_and_kueue_label_keys_are_refused_in_a_pod_template(
    tmp_path: Path, key: str, dialect: str
) -> None:
    """Those labels are the controllers' to set, and the sync reads pods by them: a
    batch job's pod carrying JobSet's read as a JobSet's, its failure not told."""
    doc = yaml.safe_load(manifest(dialect))
    for template in templates(doc):
        template.setdefault("metadata", {})["labels"] = {key: "x", "team": "ml"}
    result = checked(tmp_path, yaml.safe_dump(doc), {}, {})
    assert not result.jobs
    assert result.problems and all(key in str(p) and "reserved" in str(p) for p in result.problems)


def templates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    specs = doc["spec"].get("replicaSpecs") or list(doc["spec"]["mxReplicaSpecs"].values())
    return [spec["template"] for spec in specs]
