"""Which job each live JobSet belongs to, with its pods and Kueue's Workloads: the
JobSet runtime's `group_live` (a `LiveJobSet` per job, `live.py` reads its state), and
the JobSets a review compares a changed manifest against.

As in the batch runtime (`batch/live.py`), an object belongs to the job its name
`{job}-{runtimeId}` names, cross-checked with the labels a hand can edit and the spec
hash; an object whose parts do not add up is a `Stray` of that job, left alone. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from mxgitops import objects
from mxgitops.model import RUNTIME_ID_LENGTH, runtime_id_of
from mxgitops.objects import KubeObject, ObjectRef
from mxgitops.runtimes.jobset.failure import JOBSET_NAME_LABEL
from mxgitops.runtimes.jobset.live import LiveJobSet
from mxgitops.runtimes.shared import scheduling
from mxgitops.runtimes.shared.base import Stray
from mxgitops.runtimes.shared.labels import RUNTIME_ID_LABEL

_NAME = re.compile(rf"(?P<job>.+)-(?P<rid>[0-9a-z]{{{RUNTIME_ID_LENGTH}}})")
_SPEC_HASH = re.compile(r"[0-9a-f]{64}")


def group_live_jobsets(
    jobsets: Sequence[KubeObject],
    pods: Sequence[KubeObject],
    workloads: Sequence[KubeObject],
    clusters: Sequence[KubeObject] = (),
) -> dict[tuple[str, str], LiveJobSet]:
    """JobSets by (namespace, job), with their pods and Workloads (and Kueue's
    MultiKueueClusters, for all); those whose parts do not add up as strays of the job
    their name names."""
    groups: dict[tuple[str, str], dict[str, list[Any]]] = {}
    by_jobset: dict[tuple[str, str], tuple[str, str]] = {}
    uids: dict[str, tuple[str, str]] = {}

    def group_of(key: tuple[str, str]) -> dict[str, list[Any]]:
        return groups.setdefault(key, {"jobsets": [], "pods": [], "workloads": [], "strays": []})

    for obj in jobsets:
        metadata = obj.get("metadata") or {}
        name, why = _identity(obj)
        if name is None:
            continue
        key = (str(metadata.get("namespace") or ""), name)
        if why is None:
            group_of(key)["jobsets"].append(obj)
            by_jobset[(key[0], str(metadata.get("name")))] = key
            uids[str(metadata.get("uid") or "")] = key
        else:
            group_of(key)["strays"].append(Stray(ObjectRef.of(obj), why))
    for pod in pods:
        metadata = pod.get("metadata") or {}
        owner = by_jobset.get(
            (
                str(metadata.get("namespace") or ""),
                objects.labels_of(pod).get(JOBSET_NAME_LABEL, ""),
            )
        )
        if owner is not None:
            group_of(owner)["pods"].append(pod)
    for workload in workloads:
        for ref in (workload.get("metadata") or {}).get("ownerReferences") or []:
            owner = uids.get(str(ref.get("uid") or ""))
            if ref.get("kind") == "JobSet" and owner is not None:
                group_of(owner)["workloads"].append(workload)
    return {
        key: LiveJobSet(
            key[0],
            key[1],
            tuple(group["jobsets"]),
            tuple(group["pods"]),
            tuple(group["workloads"]),
            tuple(group["strays"]),
            tuple(clusters),
        )
        for key, group in sorted(groups.items())
    }


def is_jobset_pod(pod: Mapping[str, Any]) -> bool:
    return JOBSET_NAME_LABEL in objects.labels_of(pod)


def _identity(obj: KubeObject) -> tuple[str | None, str | None]:
    metadata = obj.get("metadata") or {}
    labels = metadata.get("labels") or {}
    match = _NAME.fullmatch(str(metadata.get("name") or ""))
    if match is None:
        return labels.get(objects.JOB_NAME_LABEL), "its name is not one mxgitops gives"
    job, runtime_id = match.group("job", "rid")
    wrong = [
        f"label {key} is {_shown(labels.get(key))}, its name says {value}"
        for key, value in ((objects.JOB_NAME_LABEL, job), (RUNTIME_ID_LABEL, runtime_id))
        if labels.get(key) != value
    ]
    spec_hash = (metadata.get("annotations") or {}).get(objects.SPEC_HASH_ANNOTATION, "")
    if not _SPEC_HASH.fullmatch(spec_hash) or runtime_id_of(spec_hash) != runtime_id:
        wrong.append(f"annotation {objects.SPEC_HASH_ANNOTATION} is not of runtime {runtime_id}")
    return job, "; ".join(wrong) or None


def _shown(value: str | None) -> str:
    return "missing" if value is None else repr(value)


def created_jobsets(jobsets: Sequence[KubeObject]) -> tuple[list[KubeObject], list[KubeObject]]:
    """Rendered JobSets as the cluster holds them once created (each with a uid), and the
    Workload Kueue makes for each queued one, active: what a review compares a changed
    manifest against (`runtimes.as_created`), to show what a sync would patch."""
    created: list[KubeObject] = []
    workloads: list[KubeObject] = []
    for index, jobset in enumerate(jobsets):
        metadata = dict(jobset.get("metadata") or {})
        metadata["uid"] = f"rendered-{index}"
        created.append({**jobset, "metadata": metadata})
        if scheduling.QUEUE_LABEL in (metadata.get("labels") or {}):
            owner = {"kind": "JobSet", "name": metadata.get("name"), "uid": metadata["uid"]}
            workload_metadata = {
                "name": f"jobset-{metadata.get('name')}",
                "namespace": metadata.get("namespace"),
                "ownerReferences": [owner],
            }
            workloads.append(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "Workload",
                    "metadata": workload_metadata,
                    "spec": {"active": True},
                }
            )
    return created, workloads
