"""The comparison itself, pure: what it resolves, what it tells apart, and the manual's
table it reads (without a cluster)."""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.kubeflow.compare import Resolver, differences, operator_pods, view
from tests.kubeflow.differences import KEPT, kept_differences


def pod(name: str, labels: dict[str, str], env: dict[str, str], **spec: Any) -> dict[str, Any]:
    container = {
        "name": "mxnet",
        "image": "i",
        "env": [{"name": k, "value": v} for k, v in env.items()],
    }
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [container], **spec},
    }


def headless(name: str, selector: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"clusterIP": "None", "selector": selector}}


THEIRS = {
    "training.kubeflow.org/replica-type": "worker",
    "training.kubeflow.org/replica-index": "0",
}
OURS = {"mxgitops.io/job": "j", "job_type": "WORKER", "task_index": "0", **THEIRS}


def test_addresses_resolve_to_the_replica_they_reach() -> None:
    config = {"cluster": {"worker": [{"url": "w0.svc", "port": 1}]}, "task": {}}
    ours = pod("p", OURS, {"MX_CONFIG": json.dumps(config)}, hostname="w0", subdomain="svc")
    theirs = pod(
        "j-worker-0",
        THEIRS,
        {
            "MX_CONFIG": json.dumps(
                {**config, "cluster": {"worker": [{"url": "j-worker-0", "port": 1}]}}
            )
        },
    )
    resolver = Resolver(
        [ours, theirs], [headless("svc", {"job_type": "WORKER"}), headless("j-worker-0", THEIRS)]
    )
    assert view(ours, resolver)["containers[mxnet].env.MX_CONFIG"]["cluster"] == {
        "worker": [{"url": "worker 0", "port": 1}]
    }
    assert differences({("worker", 0): theirs}, {("worker", 0): ours}, resolver) == []
    lost = copy.deepcopy(ours)
    lost["spec"]["subdomain"] = "other"  # no Service of that name: the address leads nowhere
    elsewhere = Resolver([lost, theirs], resolver.services)
    (found,) = differences({("worker", 0): theirs}, {("worker", 0): lost}, elsewhere)
    assert found.field == "containers[mxnet].env.MX_CONFIG"
    assert found.mxgitops["cluster"]["worker"][0]["url"] == "w0.svc (unresolved)"


def test_an_environment_variable_one_side_lacks_is_a_difference() -> None:
    ours = pod("p", OURS, {"DMLC_ROLE": "worker"})
    theirs = pod("q", THEIRS, {"DMLC_ROLE": "worker", "DMLC_WORKER_ID": "0"})
    (found,) = differences({("worker", 0): theirs}, {("worker", 0): ours}, Resolver([], []))
    assert (found.field, found.operator, found.mxgitops) == (
        "containers[mxnet].env.DMLC_WORKER_ID",
        "0",
        None,
    )


def test_the_operators_pod_labels_are_compared() -> None:
    """Selectors written for the operator's pods must match mxgitops' alike."""
    bare = {k: v for k, v in OURS.items() if not k.startswith("training.kubeflow.org/")}
    ours, theirs = pod("p", bare, {}), pod("q", {**THEIRS, "x": "y"}, {})
    found = differences({("worker", 0): theirs}, {("worker", 0): ours}, Resolver([], []))
    assert [(d.field, d.operator, d.mxgitops) for d in found] == [
        ("labels.training.kubeflow.org/replica-index", "0", None),
        ("labels.training.kubeflow.org/replica-type", "worker", None),
    ]


def test_the_operators_pods_are_told_by_its_name_not_by_its_labels_alone() -> None:
    job = {"training.kubeflow.org/job-name": "j"}
    name = "training.kubeflow.org/operator-name"
    theirs = pod("q", {**THEIRS, **job, name: "mxjob-controller"}, {})
    ours = pod("p", {**OURS, **job, name: "mxgitops"}, {})
    assert operator_pods([theirs, ours], "j") == {("worker", 0): theirs}


def test_the_manuals_table_is_read() -> None:
    assert {"always-refused", "finished-stops", "priority-class", "exit-code-backoff"} <= KEPT
    text = (
        "intro\n\n## Differences kept on purpose\n\n| id | x |\n| --- | --- |\n| `a-b` | y |\n"
        "\n## Next\n| `c` | z |"
    )
    assert kept_differences(text) == {"a-b"}
