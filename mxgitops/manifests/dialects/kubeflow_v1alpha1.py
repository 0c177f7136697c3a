"""kubeflow.org/v1alpha1 MXJob: the seed's list form under Kubeflow's group (2018).

Read as the list form (field names in any case, as Go's encoding/json matched
them), plus that version's own fields, converted rather than dropped:

- `cleanupPodPolicy` is the run policy's `cleanPodPolicy`;
- `schedulerName` goes onto every pod template that names no scheduler;
- `mxImage` (the image for containers that name none) fills in the image of an
  `mxnet` container without one, and gets a warning when no container needs it;
- `terminationPolicy.chief` is accepted where it states mxgitops' own rule
  (a dist job ends with its SCHEDULER 0, a local one with its WORKER 0), and
  refused otherwise: no other replica can decide when a job has finished.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mxgitops.manifests.dialects.base import Reading, Version, canonical_keys
from mxgitops.manifests.dialects.listform import SPEC_FIELDS, read_list_form
from mxgitops.model import (
    CONTAINER_NAME,
    KUBEFLOW_KIND,
    CleanPodPolicy,
    Dialect,
    FieldProblem,
    ReplicaSpec,
    ReplicaType,
    RunPolicy,
)

OWN_FIELDS = ("cleanupPodPolicy", "schedulerName", "mxImage", "terminationPolicy")


def read(spec: Mapping[str, Any]) -> Reading:
    warnings: list[FieldProblem] = []
    spec, problems = canonical_keys(spec, (*SPEC_FIELDS, *OWN_FIELDS), ("spec",), warnings)
    reading = read_list_form(spec, any_case=True)
    reading.problems[:0] = problems
    reading.warnings[:0] = warnings
    if spec.get("cleanupPodPolicy"):
        reading.run_policy = RunPolicy(clean_pod_policy=CleanPodPolicy(spec["cleanupPodPolicy"]))
    if spec.get("schedulerName"):
        reading.replicas = [
            _with_scheduler(r, str(spec["schedulerName"]), reading) for r in reading.replicas
        ]
    if spec.get("mxImage"):
        _fill_image(str(spec["mxImage"]), reading)
    chief = (spec.get("terminationPolicy") or {}).get("chief")
    if chief:
        _check_chief(chief, reading)
    return reading


def _with_scheduler(replica: ReplicaSpec, scheduler: str, reading: Reading) -> ReplicaSpec:
    pod_spec: Mapping[str, Any] = replica.template.get("spec") or {}
    own = pod_spec.get("schedulerName")
    if own is None:
        template = {**replica.template, "spec": {**pod_spec, "schedulerName": scheduler}}
        return replace(replica, template=template)
    if own != scheduler:
        reading.warnings.append(
            FieldProblem(
                (*replica.path, "template", "spec", "schedulerName"),
                f"{own} is this replica's scheduler; spec.schedulerName {scheduler} applies "
                "to the other replicas only",
            )
        )
    return replica


def _fill_image(image: str, reading: Reading) -> None:
    filled = False
    for position, replica in enumerate(reading.replicas):
        pod_spec: Mapping[str, Any] = replica.template.get("spec") or {}
        containers = list(pod_spec.get("containers") or [])
        for index, container in enumerate(containers):
            is_mxnet = isinstance(container, Mapping) and container.get("name") == CONTAINER_NAME
            if is_mxnet and not container.get("image"):
                containers[index] = {**container, "image": image}
                filled = True
        template = {**replica.template, "spec": {**pod_spec, "containers": containers}}
        if template != replica.template:
            reading.replicas[position] = replace(replica, template=template)
    if not filled:
        reading.warnings.append(
            FieldProblem(
                ("spec", "mxImage"),
                f"{image} is not used: every mxnet container names its own image",
            )
        )


def _check_chief(chief: Mapping[str, Any], reading: Reading) -> None:
    name = str(chief.get("replicaName", "")).upper()
    index = chief.get("replicaIndex", 0)
    types = {r.type for r in reading.replicas}
    ends_job = ReplicaType.SCHEDULER if ReplicaType.SCHEDULER in types else ReplicaType.WORKER
    if (name, index) != (ends_job.value, 0):
        reading.problems.append(
            FieldProblem(
                ("spec", "terminationPolicy", "chief"),
                f"chief {name or '(none)'} {index} is not supported: a job ends when its "
                f"{ends_job.value} 0 ends (a dist job with its SCHEDULER, a local one with "
                "its WORKER); remove terminationPolicy",
            )
        )


VERSION = Version(
    Dialect.KUBEFLOW_V1ALPHA1, KUBEFLOW_KIND, "mxjob-kubeflow-v1alpha1.json", "replicaSpecs", read
)
