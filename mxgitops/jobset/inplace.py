"""What changes on a live JobSet without a restart: compared, and patched in place.

A JobSet's replicatedJobs are immutable; `spec.suspend` and `ttlSecondsAfterFinished`
are not. As on the batch runtime (`trainer/inplace.py`, whose annotation records the
values set), a value the manifest changed is an update and a value a hand changed is
drift, set back. A queued job's `suspend` is Kueue's (it admits and evicts the job by
it), and so is everything Kueue injects into the pod templates: none of it is read here,
so none of it is ever "repaired". Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mxgitops import objects
from mxgitops.jobset.render import in_place_values, recorded_in_place
from mxgitops.model import MxJob, OnChange
from mxgitops.objects import KubeObject, ObjectRef
from mxgitops.spec import ON_CHANGE_ANNOTATION
from mxgitops.trainer.inplace import IN_PLACE_ANNOTATION, InPlace, Move

_DEFAULTS: Mapping[str, Any] = {"suspend": False}


def compare(
    job: MxJob, jobsets: Sequence[KubeObject], workloads: Sequence[KubeObject] = ()
) -> list[InPlace]:
    """The patches that bring the live JobSets of `job`'s runtime (and, for a queued job's
    suspend, their Kueue Workloads) to its manifest."""
    want = in_place_values(job)
    wait = OnChange.WAIT.value if job.on_change is OnChange.WAIT else None
    found: list[InPlace | None] = []
    for obj in jobsets:
        recorded = recorded_in_place(job)
        activation = None
        if job.queue and _suspend_changed(obj, recorded):
            workload = _workload_of(obj, workloads)
            if workload is None:  # Kueue has made none yet: the change waits with it
                recorded = {k: v for k, v in recorded.items() if k != "suspend"}
            else:
                activation = _activation(job, workload)
        found += [_jobset(obj, want, recorded, wait), activation]
    return sorted((p for p in found if p is not None), key=lambda p: p.ref)


def _suspend_changed(jobset: KubeObject, recorded: Mapping[str, Any]) -> bool:
    applied = _decode(objects.annotations_of(jobset).get(IN_PLACE_ANNOTATION, ""))
    return bool(applied.get("suspend")) != bool(recorded.get("suspend"))


def _workload_of(jobset: KubeObject, workloads: Sequence[KubeObject]) -> KubeObject | None:
    uid = (jobset.get("metadata") or {}).get("uid")
    for workload in workloads:
        for owner in (workload.get("metadata") or {}).get("ownerReferences") or []:
            if owner.get("kind") == "JobSet" and owner.get("uid") == uid:
                return workload
    return None


def _activation(job: MxJob, workload: KubeObject) -> InPlace:
    """Stop (or resume) a queued job the way Kueue expects: its Workload's spec.active."""
    active = not job.run_policy.suspend
    before = (workload.get("spec") or {}).get("active", True)
    moved = Move("spec.active", before, active)  # of the Workload: the ref names it
    return InPlace(ObjectRef.of(workload), {"spec": {"active": active}}, (moved,), drift=False)


def _jobset(
    obj: KubeObject, want: Mapping[str, Any], recorded: Mapping[str, Any], wait: str | None
) -> InPlace | None:
    spec = obj.get("spec") or {}
    annotations = objects.annotations_of(obj)
    applied = _decode(annotations.get(IN_PLACE_ANNOTATION, ""))
    spec_patch: dict[str, Any] = {}
    updated: list[Move] = []
    drifted: list[Move] = []
    for name, target in want.items():
        live = spec.get(name, _DEFAULTS.get(name))
        if live == target:
            continue
        spec_patch[name] = target
        if applied.get(name, _DEFAULTS.get(name)) != target:
            updated.append(Move(f"spec.{name}", live, target))
        else:
            drifted.append(Move(f"spec.{name}", live, target, set_back=True))
    metadata: dict[str, Any] = {}
    if recorded != applied:
        metadata[IN_PLACE_ANNOTATION] = _encode(recorded) if recorded else None
    if annotations.get(ON_CHANGE_ANNOTATION) != wait:
        metadata[ON_CHANGE_ANNOTATION] = wait
        before = annotations.get(ON_CHANGE_ANNOTATION)
        updated.append(Move(ON_CHANGE_ANNOTATION, before or "replace", wait or "replace"))
    if not spec_patch and not metadata:
        return None
    patch: KubeObject = {}
    if metadata:
        patch["metadata"] = {"annotations": metadata}
    if spec_patch:
        patch["spec"] = spec_patch
    moves = tuple(updated + drifted)
    return InPlace(ObjectRef.of(obj), patch, moves, drift=bool(drifted) and not updated)


def _encode(values: Mapping[str, Any]) -> str:
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def _decode(text: str) -> dict[str, Any]:
    try:
        values = json.loads(text) if text else {}
    except ValueError:
        return {}
    return dict(values) if isinstance(values, dict) else {}
