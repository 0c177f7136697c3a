"""Every kubeflow.org/v1 MXJob of the published corpus and the examples, created both
as an MXJob for Kubeflow's training operator v1.8.1 and through mxgitops, side by
side on the same real kube-apiserver: their pods are compared replica by replica
(`compare.py`), and any difference not in the manual's table of differences kept on
purpose fails the test."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.manifests.loading import load
from mxgitops.runtimes.registry import render
from mxgitops.runtimes.shared.podtemplate import RenderContext
from tests.controlplane.harness import RealCluster, wait_for
from tests.helpers import corpus
from tests.helpers.published import FILES, header
from tests.helpers.sync import NS, Syncer
from tests.kubeflow.compare import (
    OPERATOR_JOB,
    Difference,
    Resolver,
    differences,
    mxgitops_pods,
    operator_pods,
)
from tests.kubeflow.differences import KEPT
from tests.kubeflow.operator import MXJOBS

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT.parent / "jobs-repo-example" / "jobs"


def kubeflow_v1_manifests(runtime: str = "batch") -> list[Path]:
    """The valid kubeflow.org/v1 training jobs of the corpus and the examples that
    mxgitops runs on `runtime` (a queued job runs as a JobSet Kueue admits)."""
    candidates = [p for p in FILES if header(p)["expect"] == "valid"]
    candidates += [*corpus.each_file(), *sorted(EXAMPLES.rglob("*.y*ml"))]
    found = []
    for path in candidates:
        doc = yaml.safe_load(path.read_text())
        spec = doc.get("spec") or {}
        if doc.get("apiVersion") != "kubeflow.org/v1" or spec.get("jobMode") == "MXTune":
            continue
        (job,) = load(path).jobs
        if job.runtime is runtime:
            found.append(path)
    return found


@pytest.mark.parametrize("path", kubeflow_v1_manifests("jobset"), ids=corpus.label)
def test_a_queued_job_is_the_kept_difference_queued(path: Path) -> None:
    """Queued (a Kueue queue named), mxgitops runs it as one JobSet that Kueue admits
    whole, where the operator made its pods (and a PodGroup, with a gang scheduler):
    not compared pod by pod here; the JobSet runtime has its own tests on the real
    JobSet and Kueue (tests/e2e/test_jobset.py)."""
    assert "queued" in KEPT
    assert [o["kind"] for o in rendered_objects(path)] == ["JobSet"]


def rendered_objects(path: Path) -> list[dict[str, Any]]:
    (job,) = load(path).jobs
    return render(job, RenderContext(instance="kubeflow"))


def priority_classes(doc: dict[str, Any]) -> set[str]:
    spec = doc.get("spec") or {}
    policy = (spec.get("runPolicy") or spec).get("schedulingPolicy") or {}
    return {policy["priorityClass"]} if policy.get("priorityClass") else set()


@pytest.fixture
def priority_class(cluster: RealCluster) -> Iterator[Callable[[str], None]]:
    """Creates a PriorityClass a manifest names (as its cluster would have it)."""
    made: list[str] = []
    path = "/apis/scheduling.k8s.io/v1/priorityclasses"

    def create(name: str) -> None:
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 1000}
        cluster.rest.create(path, {**body, "metadata": {"name": name}})
        made.append(name)

    yield create
    for name in made:
        cluster.rest.delete(f"{path}/{name}")


def created_both_ways(
    cluster: RealCluster,
    repo: Path,
    path: Path | dict[str, Any],
    priority_class: Callable[[str], None],
) -> dict[str, Any]:
    doc = copy.deepcopy(path) if isinstance(path, dict) else yaml.safe_load(path.read_text())
    for name in priority_classes(doc):
        priority_class(name)
    doc.pop("status", None)
    doc["metadata"]["namespace"] = NS  # one namespace for both
    (repo / f"{doc['metadata']['name']}.yaml").write_text(yaml.safe_dump(doc))
    outcome = Syncer(cluster, repo)()
    assert not outcome.summary.problems, outcome.summary.problems
    theirs = copy.deepcopy(doc)
    theirs["metadata"]["namespace"] = NS
    cluster.rest.create(MXJOBS.format(namespace=NS), theirs)
    return doc


def replicas_of(doc: dict[str, Any]) -> int:
    return sum(int(r.get("replicas", 1)) for r in doc["spec"]["mxReplicaSpecs"].values())


def edge(name: str, replicas: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name},
        "spec": {"jobMode": "MXTrain", "mxReplicaSpecs": replicas, **spec},
    }


def replica(count: int, *containers: dict[str, Any], **extra: Any) -> dict[str, Any]:
    mxnet = {"name": "mxnet", "image": "mxnet/python:1.9.1", "command": ["python", "train.py"]}
    pod = {"containers": [mxnet, *containers], **extra}
    return {"replicas": count, "template": {"spec": pod}}


SIDECAR = {"name": "monitor", "image": "busybox", "args": ["sleep", "infinity"]}
PORT = {"ports": [{"name": "mxjob-port", "containerPort": 9876}]}
EDGE_CASES = [
    edge("local", {"Worker": replica(1)}),
    edge("local-sidecar", {"Worker": replica(1, SIDECAR)}),
    edge(
        "wide",
        {"Scheduler": replica(1), "Server": replica(3), "Worker": replica(4, SIDECAR)},
    ),
    edge(
        "own-port",
        {
            "Scheduler": {
                "replicas": 1,
                "template": {
                    "spec": {"containers": [{"name": "mxnet", "image": "mxnet:1", **PORT}]}
                },
            },
            "Server": replica(1),
            "Worker": replica(2),
        },
    ),
    edge(
        "init-and-env",
        {
            "Scheduler": replica(1),
            "Server": replica(1),
            "Worker": replica(
                2, initContainers=[{"name": "fetch", "image": "busybox", "args": ["true"]}]
            ),
        },
    ),
    edge(
        "byteps-all-workers",
        {"Scheduler": replica(1), "Server": replica(2), "Worker": replica(3)},
        successPolicy="AllWorkers",
    ),
    edge(
        "restart-policies",
        {
            "Scheduler": {**replica(1), "restartPolicy": "Never"},
            "Server": {**replica(1), "restartPolicy": "OnFailure"},
            "Worker": {**replica(2), "restartPolicy": "ExitCode"},
        },
    ),
]


@pytest.mark.parametrize(
    "path",
    [*kubeflow_v1_manifests(), *EDGE_CASES],
    ids=lambda p: corpus.label(p) if isinstance(p, Path) else f"edge-{p['metadata']['name']}",
)
def test_the_pods_agree_with_the_operators(
    cluster: RealCluster,
    repo: Path,
    path: Path | dict[str, Any],
    priority_class: Callable[[str], None],
) -> None:
    doc = created_both_ways(cluster, repo, path, priority_class)
    name, count = doc["metadata"]["name"], replicas_of(doc)

    def both() -> tuple[Any, Any] | None:
        pods = cluster.objects("pods", NS)
        theirs, ours = operator_pods(pods, name), mxgitops_pods(pods, name)
        if not len(theirs) == len(ours) == count:
            return None
        # The operator creates each replica type's Services after its pods: until all
        # are there, its addresses would not resolve.
        return (theirs, ours) if len(operator_services(name)) == count else None

    def operator_services(job: str) -> list[Any]:
        services = cluster.objects("services", NS)
        return [s for s in services if (s["metadata"].get("labels") or {}).get(OPERATOR_JOB) == job]

    try:
        theirs, ours = wait_for(f"for the pods of {name} both ways", both)
    except TimeoutError:
        pods = cluster.objects("pods", NS)
        status = cluster.rest.get(f"{MXJOBS.format(namespace=NS)}/{name}").get("status")
        raise AssertionError(
            f"{count} replicas; operator's pods {sorted(operator_pods(pods, name))}, "
            f"its Services {len(operator_services(name))}, "
            f"mxgitops' {sorted(mxgitops_pods(pods, name))}; MXJob status {status}"
        ) from None
    resolver = Resolver(cluster.objects("pods", NS), cluster.objects("services", NS))
    found = differences(theirs, ours, resolver)
    unlisted = [d for d in found if kept(d) not in KEPT]
    assert not unlisted, "\n".join(str(d) for d in unlisted)


def kept(difference: Difference) -> str:
    """The manual's row that keeps a difference on purpose ("" for none)."""
    if difference.field == "priorityClassName" and difference.operator is None:
        return "priority-class"
    if difference.field == "labels.training.kubeflow.org/operator-name" and (
        difference.operator,
        difference.mxgitops,
    ) == ("mxjob-controller", "mxgitops"):
        return "operator-name"
    return ""
