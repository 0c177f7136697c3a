"""The JobSet runtime in tests: a queued job, its JobSet and pods read back, Kueue's
set-up on the real control plane (tests/ecosystem/)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mxgitops.manifests.spec import from_manifest
from mxgitops.runtimes.shared.podtemplate import RenderContext
from tests.controlplane.harness import wait_for
from tests.ecosystem.fixtures import KUEUE_GROUP, Ecosystem
from tests.helpers.sync import NS, mxjob

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2"
GPU = "nvidia.com/gpu"


def only_jobset(eco: Ecosystem, job: str) -> dict[str, Any]:
    (found,) = [j for j in eco.jobsets(NS) if j["metadata"]["labels"].get("mxgitops.io/job") == job]
    return found


def pod_of(eco: Ecosystem, jobset: str, role: str, index: int = 0) -> dict[str, Any]:
    """The live pod of one replica, of the JobSet's current attempt (a restart of the
    gang recreates every pod)."""

    def find() -> dict[str, Any] | None:
        found = eco.rest.get(f"{JOBSETS}/namespaces/{NS}/jobsets/{jobset}")
        attempt = str((found.get("status") or {}).get("restarts") or 0)
        for pod in eco.pods(jobset, NS):
            labels = pod["metadata"]["labels"]
            if (
                labels.get("jobset.sigs.k8s.io/restart-attempt") == attempt
                and labels.get("jobset.sigs.k8s.io/replicatedjob-name") == role
                and labels.get("batch.kubernetes.io/job-completion-index") == str(index)
                and pod["status"].get("phase") not in ("Succeeded", "Failed")
                and not pod["metadata"].get("deletionTimestamp")
            ):
                return pod
        return None

    return wait_for(f"for the {role} {index} pod of {jobset}", find)


def step(eco: Ecosystem, pod: dict[str, Any], **move: Any) -> None:
    eco.real.kubelet(pod["metadata"]["name"], namespace=NS, **move)


def condition(jobset: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for found in (jobset.get("status") or {}).get("conditions") or []:
        if found["type"] == kind and found["status"] == "True":
            return dict(found)
    return None


def until(eco: Ecosystem, job: str, what: str, probe: Callable[[dict[str, Any]], bool]) -> None:
    wait_for(f"for {job}'s JobSet {what}", lambda: probe(only_jobset(eco, job)) or None)


def kueue_setup(
    eco: Ecosystem, gpus: int, preemption: bool = False, workload_priorities: bool = False
) -> None:
    eco.create(
        KUEUE_GROUP,
        "resourceflavors",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "gpu"},
            "spec": {},
        },
        None,
    )
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", GPU],
                "flavors": [
                    {
                        "name": "gpu",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "64"},
                            {"name": "memory", "nominalQuota": "512Gi"},
                            {"name": GPU, "nominalQuota": str(gpus)},
                        ],
                    }
                ],
            }
        ],
    }
    if preemption:
        spec["preemption"] = {"withinClusterQueue": "LowerPriority"}
    eco.create(
        KUEUE_GROUP,
        "clusterqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "gpus"},
            "spec": spec,
        },
        None,
    )
    eco.local_queue("team", NS, "gpus")
    for name, value in (("low", 100), ("high", 1000)):
        if workload_priorities:
            eco.create(
                KUEUE_GROUP,
                "workloadpriorityclasses",
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                },
                None,
            )
        eco.create(
            "/apis/scheduling.k8s.io/v1",
            "priorityclasses",
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            },
            None,
        )


def gpu_job(name: str, *, workers: int = 2, gpus: int = 4, priority: str = "low") -> dict[str, Any]:
    """A dist job whose workers take `gpus` GPUs each: 8 in all by default."""
    doc = mxjob(
        name,
        workers=workers,
        runPolicy={"schedulingPolicy": {"queue": "team", "priorityClass": priority}},
    )
    worker = doc["spec"]["mxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"] = {"limits": {GPU: gpus}}
    return doc


CTX = RenderContext("prod")


def job_of(doc: dict[str, Any], runtime: str = "jobset") -> Any:
    return from_manifest(doc, default_namespace="ml", default_runtime=runtime)


def queued(name: str = "a", queue: str = "team", **policy: Any) -> dict[str, Any]:
    return mxjob(name, runPolicy={"schedulingPolicy": {"queue": queue, **policy}})
