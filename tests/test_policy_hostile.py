"""What a pull request can slip past validate (issue 37): a priority for Kueue past
allowedPriorityClasses, a queue name Kubernetes will not take, label keys of JobSet
and Kueue in a pod template."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.test_policy import checked, manifest


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
