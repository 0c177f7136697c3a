"""Compare the pods of one job as Kubeflow's operator made them and as mxgitops did.

Pure: it takes the listed pods and Services of the namespace. Per replica (role,
index), every container's image, command, args, resources, ports and environment,
the pod's restart policy, and the operator's labels (`training.kubeflow.org/*`,
what selectors written for its pods match on). Addresses are compared by where they lead, since
names differ by design (mxgitops' carry a runtime id): each name in
`DMLC_PS_ROOT_URI` and in `MX_CONFIG` (compared as JSON) is resolved by the
cluster DNS rules to a pod, and replaced by that pod's replica, e.g.
`worker 1`. A name that leads to no pod, or to several, stays as written with
`(unresolved)` after it, and so differs from any that resolves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Replica = tuple[str, int]  # ("worker", 1)
OPERATOR_TYPE = "training.kubeflow.org/replica-type"
OPERATOR_INDEX = "training.kubeflow.org/replica-index"
OPERATOR_JOB = "training.kubeflow.org/job-name"
OPERATOR_NAME = "training.kubeflow.org/operator-name"
KUBEFLOW_LABELS = "training.kubeflow.org/"
COMPARED_CONTAINER_FIELDS = ("image", "command", "args", "resources", "ports")


@dataclass(frozen=True)
class Difference:
    replica: Replica
    field: str  # "containers[mxnet].env.DMLC_WORKER_ID", "restartPolicy"
    operator: Any
    mxgitops: Any

    def __str__(self) -> str:
        role, index = self.replica
        return (
            f"{role} {index}: {self.field}: operator {self.operator!r}, mxgitops {self.mxgitops!r}"
        )


def operator_replica(pod: Mapping[str, Any]) -> Replica | None:
    """A pod's replica by the operator's labels (mxgitops' pods carry them too)."""
    labels = pod["metadata"].get("labels") or {}
    if OPERATOR_TYPE not in labels or OPERATOR_INDEX not in labels:
        return None
    return labels[OPERATOR_TYPE], int(labels[OPERATOR_INDEX])


def mxgitops_replica(pod: Mapping[str, Any]) -> Replica | None:
    labels = pod["metadata"].get("labels") or {}
    if "job_type" not in labels:
        return None
    return labels["job_type"].lower(), int(labels["task_index"])


def replica_of(pod: Mapping[str, Any]) -> Replica | None:
    return operator_replica(pod) or mxgitops_replica(pod)


def operator_pods(pods: Sequence[Mapping[str, Any]], job: str) -> dict[Replica, Mapping[str, Any]]:
    found = {}
    for pod in pods:
        replica = operator_replica(pod)
        labels = pod["metadata"].get("labels") or {}
        if (
            replica
            and labels.get(OPERATOR_JOB) == job
            and labels.get(OPERATOR_NAME) == ("mxjob-controller")
        ):
            found[replica] = pod
    return found


def mxgitops_pods(pods: Sequence[Mapping[str, Any]], job: str) -> dict[Replica, Mapping[str, Any]]:
    """The newest pod of each replica of mxgitops' job `job`."""
    found: dict[Replica, Mapping[str, Any]] = {}
    for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or ""):
        replica = mxgitops_replica(pod)
        if replica and (pod["metadata"].get("labels") or {}).get("mxgitops.io/job") == job:
            found[replica] = pod
    return found


@dataclass(frozen=True)
class Resolver:
    """Kubernetes' DNS for pods and Services of one namespace, as a pod there asks it."""

    pods: Sequence[Mapping[str, Any]]
    services: Sequence[Mapping[str, Any]]

    def resolve(self, name: str, asking: Mapping[str, Any]) -> str:
        if not name:
            return ""
        found = self._pods_of(name, asking)
        replicas = {replica_of(p) for p in found}
        if len(replicas) == 1 and None not in replicas:
            role, index = next(iter(replicas))  # type: ignore[misc]
            return f"{role} {index}"
        return f"{name} (unresolved)"

    def _pods_of(self, name: str, asking: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        host, _, subdomain = name.partition(".")
        if subdomain:  # <hostname>.<subdomain>: a pod of a headless Service
            service = self._service(subdomain)
            if service is None or (service["spec"].get("clusterIP") != "None"):
                return []
            return [
                p
                for p in self._selected(service)
                if p["spec"].get("hostname") == host and p["spec"].get("subdomain") == subdomain
            ]
        service = self._service(host)
        if service is not None:  # a Service: the pods it selects
            return self._selected(service)
        if asking["spec"].get("hostname", asking["metadata"]["name"]) == host:
            return [asking]  # the pod's own hostname, in its /etc/hosts
        return []

    def _service(self, name: str) -> Mapping[str, Any] | None:
        return next((s for s in self.services if s["metadata"]["name"] == name), None)

    def _selected(self, service: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        selector = service["spec"].get("selector") or {}
        if not selector:
            return []
        return [
            p for p in self.pods if selector.items() <= (p["metadata"].get("labels") or {}).items()
        ]


def view(pod: Mapping[str, Any], resolver: Resolver) -> dict[str, Any]:
    """What is compared of one pod, its addresses resolved."""
    spec = pod["spec"]
    shown: dict[str, Any] = {
        field: spec.get(field) for field in ("restartPolicy", "priorityClassName", "schedulerName")
    }
    for key, value in (pod["metadata"].get("labels") or {}).items():
        if key.startswith(KUBEFLOW_LABELS):
            shown[f"labels.{key}"] = value
    for container in spec.get("containers") or []:
        where = f"containers[{container['name']}]"
        for field in COMPARED_CONTAINER_FIELDS:
            shown[f"{where}.{field}"] = container.get(field)
        for entry in container.get("env") or []:
            value = entry.get("value", entry.get("valueFrom"))
            if entry["name"] == "DMLC_PS_ROOT_URI":
                value = resolver.resolve(str(value or ""), pod)
            elif entry["name"] == "MX_CONFIG":
                value = _resolved_config(str(value), pod, resolver)
            shown[f"{where}.env.{entry['name']}"] = value
    return shown


def _resolved_config(text: str, pod: Mapping[str, Any], resolver: Resolver) -> Any:
    try:
        config = json.loads(text)
    except ValueError:
        return text
    for addresses in (config.get("cluster") or {}).values():
        for address in addresses:
            address["url"] = resolver.resolve(str(address.get("url", "")), pod)
    return config


def differences(
    operator: Mapping[Replica, Mapping[str, Any]],
    mxgitops: Mapping[Replica, Mapping[str, Any]],
    resolver: Resolver,
) -> list[Difference]:
    found = []
    for replica in sorted(set(operator) | set(mxgitops)):
        if replica not in operator or replica not in mxgitops:
            found.append(Difference(replica, "pod", replica in operator, replica in mxgitops))
            continue
        theirs, ours = view(operator[replica], resolver), view(mxgitops[replica], resolver)
        for field in sorted(set(theirs) | set(ours)):
            if theirs.get(field) != ours.get(field):
                found.append(Difference(replica, field, theirs.get(field), ours.get(field)))
    return found
