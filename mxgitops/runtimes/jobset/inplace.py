"""What changes on a live JobSet without a restart: compared, and patched in place.

A JobSet's replicatedJobs are immutable; `spec.suspend` and `ttlSecondsAfterFinished`
are not. As on the batch runtime (`batch/inplace.py`, whose annotation records the
values set), a value the manifest changed is an update and a value a hand changed is
drift, set back. A queued job's `spec.suspend` is Kueue's (it admits and evicts the job
by it), and so is everything Kueue injects into the pod templates: none of it is read
here, so none of it is ever "repaired". A queued job's `runPolicy.suspend` is carried out
through Kueue instead: the hold label of a JobSet Kueue has made no Workload for yet,
the Workload's spec.active once it has (`_queueing`). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mxgitops import objects
from mxgitops.model import ON_CHANGE_ANNOTATION, MxJob, OnChange
from mxgitops.objects import KubeObject, ObjectRef
from mxgitops.runtimes.jobset.render import (
    HOLD_LABEL,
    hold_name,
    in_place_values,
    recorded_in_place,
)
from mxgitops.runtimes.shared.inplace import IN_PLACE_ANNOTATION, InPlace, Move, decode, encode

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
        queueing = _Queueing()
        if job.queue:
            queueing = _queueing(job, obj, _workload_of(obj, workloads))
            if queueing.waits:
                recorded = {k: v for k, v in recorded.items() if k != "suspend"}
        found += [_jobset(obj, want, recorded, wait, queueing), queueing.activation]
    return sorted((p for p in found if p is not None), key=lambda p: p.ref)


@dataclass(frozen=True)
class _Queueing:
    """How a queued job's `runPolicy.suspend` is carried out on one of its JobSets."""

    labels: Mapping[str, str | None] = field(default_factory=dict)  # the JobSet's
    moves: tuple[Move, ...] = ()  # of the JobSet's labels
    activation: InPlace | None = None  # of its Workload
    waits: bool = False  # not possible yet: not recorded as done either


def _queueing(job: MxJob, jobset: KubeObject, workload: KubeObject | None) -> _Queueing:
    """Stop (or resume) a queued job the way Kueue expects. Before Kueue has made its
    Workload, by holding the suspended JobSet out of the queue (the hold label: a prebuilt
    Workload that never comes, `render.py`); once it has, by its Workload's spec.active,
    which makes Kueue evict the job and keep it out of the queue. Resuming removes the
    hold and reactivates a Workload this job's suspend deactivated; one Kueue itself
    deactivated (its maximum execution time, say) stays so. Either is a hand edit, set
    back, when the manifest did not change."""
    suspend = job.run_policy.suspend
    applied = bool(
        decode(objects.annotations_of(jobset).get(IN_PLACE_ANNOTATION, ""), None).get("suspend")
    )
    held = objects.labels_of(jobset).get(HOLD_LABEL)
    where = f"label {HOLD_LABEL}"
    if suspend and held is None and workload is None:
        if not (jobset.get("spec") or {}).get("suspend"):
            return _Queueing(waits=True)  # admitted, yet no Workload read: the next sync
        name = str((jobset.get("metadata") or {}).get("name") or "")
        moved = Move(where, "unset", hold_name(name), set_back=applied)
        return _Queueing({HOLD_LABEL: hold_name(name)}, (moved,))
    labels: dict[str, str | None] = {}
    moves: tuple[Move, ...] = ()
    if not suspend and held is not None:
        labels[HOLD_LABEL] = None  # allowed while the JobSet is suspended, as it is held
        moves = (Move(where, held, "unset", set_back=not applied),)
    activation = None
    if workload is not None:
        active = (workload.get("spec") or {}).get("active", True) is not False
        if suspend and active:
            activation = _activation(workload, active=False, set_back=applied)
        elif not suspend and not active and applied:
            activation = _activation(workload, active=True, set_back=False)
    return _Queueing(labels, moves, activation)


def _workload_of(jobset: KubeObject, workloads: Sequence[KubeObject]) -> KubeObject | None:
    uid = (jobset.get("metadata") or {}).get("uid")
    for workload in workloads:
        for owner in (workload.get("metadata") or {}).get("ownerReferences") or []:
            if owner.get("kind") == "JobSet" and owner.get("uid") == uid:
                return workload
    return None


def _activation(workload: KubeObject, *, active: bool, set_back: bool) -> InPlace:
    """A Workload's spec.active (the ref names the Workload)."""
    moved = Move("spec.active", not active, active, set_back=set_back)
    return InPlace(ObjectRef.of(workload), {"spec": {"active": active}}, (moved,), set_back)


def _jobset(
    obj: KubeObject,
    want: Mapping[str, Any],
    recorded: Mapping[str, Any],
    wait: str | None,
    queueing: _Queueing,
) -> InPlace | None:
    spec = obj.get("spec") or {}
    annotations = objects.annotations_of(obj)
    applied = decode(annotations.get(IN_PLACE_ANNOTATION, ""), None)
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
        metadata[IN_PLACE_ANNOTATION] = encode(recorded) if recorded else None
    if annotations.get(ON_CHANGE_ANNOTATION) != wait:
        metadata[ON_CHANGE_ANNOTATION] = wait
        before = annotations.get(ON_CHANGE_ANNOTATION)
        updated.append(Move(ON_CHANGE_ANNOTATION, before or "replace", wait or "replace"))
    for move in queueing.moves:
        (drifted if move.set_back else updated).append(move)
    if not spec_patch and not metadata and not queueing.labels:
        return None
    patch: KubeObject = {}
    if metadata or queueing.labels:
        patch["metadata"] = {}
    if metadata:
        patch["metadata"]["annotations"] = metadata
    if queueing.labels:
        patch["metadata"]["labels"] = dict(queueing.labels)
    if spec_patch:
        patch["spec"] = spec_patch
    moves = tuple(updated + drifted)
    return InPlace(ObjectRef.of(obj), patch, moves, drift=bool(drifted) and not updated)
