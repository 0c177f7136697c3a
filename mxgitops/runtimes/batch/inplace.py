"""What changes on a live batch Job without a restart: compared, and patched in place.

Kubernetes lets a few fields of a running Job change: `spec.suspend` (pausing
deletes the pods, resuming starts new ones: the job's runtime, its names and
its place in the ledger stay), `activeDeadlineSeconds`, `backoffLimit`, and
metadata (`ttlSecondsAfterFinished` is mxgitops' own, job-wide: `runpolicy.py`).
Each batch Job records the values mxgitops last set in the in-place annotation
(`runtime/inplace.py`: updates, drift set back, patches). Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxgitops import objects
from mxgitops.model import ON_CHANGE_ANNOTATION, MxJob, OnChange, RestartPolicy
from mxgitops.objects import KubeObject, ObjectRef
from mxgitops.runtimes.shared.inplace import IN_PLACE_ANNOTATION, InPlace, Move, decode, encode
from mxgitops.runtimes.shared.labels import JOB_TYPE_LABEL, REPLICA_TYPES

# A batch Job's backoffLimit meaning "no limit": the largest the API accepts.
UNLIMITED_BACKOFF = 2**31 - 1


# ttlSecondsAfterFinished is never set (the TTL is job-wide, `runpolicy.py`): compared so
# that the one an earlier version set on each batch Job is taken off.
FIELDS = ("suspend", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished")


_DEFAULTS: Mapping[str, Any] = {"suspend": False}  # what an absent field reads as


_DEFAULTED = tuple(name for name in FIELDS if name in _DEFAULTS)


def desired(job: MxJob) -> dict[str, Any]:
    """The in-place fields the manifest sets, as the batch Job's spec spells them."""
    policy = job.run_policy
    values: dict[str, Any] = {
        "activeDeadlineSeconds": policy.active_deadline_seconds,
        "backoffLimit": policy.backoff_limit,
        "suspend": True if policy.suspend else None,
    }
    return {key: value for key, value in values.items() if value is not None}


def rendered(job: MxJob, restart: RestartPolicy) -> dict[str, Any]:
    """The in-place fields of one replica's batch Job, as rendered and as patched back:
    those the manifest sets, and backoffLimit always, per the replica's restart policy
    (`batch_backoff_limit`)."""
    return {
        **desired(job),
        "backoffLimit": batch_backoff_limit(restart, job.run_policy.backoff_limit),
    }


def batch_backoff_limit(restart: RestartPolicy, job_limit: int | None) -> int:
    """The backoffLimit of one replica's batch Job (the job's own is enforced job-wide
    by `status.py`; each batch Job's is never below it, so it never fails first).

    `Never`: 0, the first failed pod fails the Job and nothing retries it, as the
    training operator failed the MXJob. `OnFailure` and `ExitCode`: the job's
    backoffLimit, or no limit when it sets none, as the operator restarted them.
    """
    if restart is RestartPolicy.NEVER:
        return 0
    return UNLIMITED_BACKOFF if job_limit is None else job_limit


def recorded_backoff_limit(batch_job: Mapping[str, Any]) -> int | None:
    """The job's backoffLimit as mxgitops recorded it on one of its batch Jobs."""
    value = decode(objects.annotations_of(batch_job).get(IN_PLACE_ANNOTATION, ""), FIELDS).get(
        "backoffLimit"
    )
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def annotation(job: MxJob) -> dict[str, str]:
    """The annotation recording `desired(job)` on each batch Job; none while it is empty."""
    values = desired(job)
    return {IN_PLACE_ANNOTATION: encode(values)} if values else {}


def compare(
    job: MxJob, live_jobs: tuple[KubeObject, ...], services: tuple[KubeObject, ...]
) -> list[InPlace]:
    """The patches that bring the live objects of `job`'s runtime to its manifest."""
    want = desired(job)
    wait = OnChange.WAIT.value if job.on_change is OnChange.WAIT else None
    by_type: dict[str, dict[str, Any]] = {}  # every batch Job of a replica set alike
    found = []
    for obj in live_jobs:
        job_type = objects.labels_of(obj).get(JOB_TYPE_LABEL, "")
        if job_type not in by_type:
            by_type[job_type] = _rendered(job, job_type)
        found.append(_batch_job(obj, want, wait, by_type[job_type]))
    found += [_on_change_only(obj, wait) for obj in services]
    return sorted((p for p in found if p is not None), key=lambda p: p.ref)


def _rendered(job: MxJob, job_type: str) -> dict[str, Any]:
    """The in-place fields as `render.py` writes them on a batch Job of the replica set
    its `job_type` label names (`rendered`)."""
    replica_type = REPLICA_TYPES.get(job_type)
    replica = job.replica(replica_type) if replica_type is not None else None
    restart = replica.restart_policy if replica is not None else RestartPolicy.ON_FAILURE
    return rendered(job, restart)


def _batch_job(
    obj: KubeObject, want: Mapping[str, Any], wait: str | None, rendered: Mapping[str, Any]
) -> InPlace | None:
    spec = obj.get("spec") or {}
    annotations = objects.annotations_of(obj)
    applied = decode(annotations.get(IN_PLACE_ANNOTATION, ""), FIELDS)
    spec_patch: dict[str, Any] = {}
    updated: list[Move] = []
    drifted: list[Move] = []
    # A field neither wanted nor recorded can only have drifted from its default: with
    # nothing set (most jobs), only those few fields are compared.
    for name in FIELDS if want or applied else _DEFAULTED:
        value, before = want.get(name), applied.get(name)
        live = spec.get(name, _DEFAULTS.get(name))
        target = rendered.get(name, value if value is not None else _DEFAULTS.get(name))
        if value != before:
            if live != target:
                spec_patch[name] = target
                updated.append(Move(f"spec.{name}", live, target))
        elif target is not None and live != target:
            spec_patch[name] = target
            drifted.append(Move(f"spec.{name}", live, target, set_back=True))
    metadata: dict[str, Any] = {}
    if want != applied:
        metadata[IN_PLACE_ANNOTATION] = encode(dict(want)) if want else None
    if annotations.get(ON_CHANGE_ANNOTATION) != wait:
        metadata[ON_CHANGE_ANNOTATION] = wait
        updated.append(_on_change_moved(annotations.get(ON_CHANGE_ANNOTATION), wait))
    if not spec_patch and not metadata:
        return None
    patch: KubeObject = {}
    if metadata:
        patch["metadata"] = {"annotations": metadata}
    if spec_patch:
        patch["spec"] = spec_patch
    return InPlace(
        ObjectRef.of(obj), patch, tuple(updated + drifted), bool(drifted) and not updated
    )


def _on_change_only(obj: KubeObject, wait: str | None) -> InPlace | None:
    current = objects.annotations_of(obj).get(ON_CHANGE_ANNOTATION)
    if current == wait:
        return None
    patch: KubeObject = {"metadata": {"annotations": {ON_CHANGE_ANNOTATION: wait}}}
    return InPlace(ObjectRef.of(obj), patch, (_on_change_moved(current, wait),), drift=False)


def _on_change_moved(before: str | None, after: str | None) -> Move:
    return Move(ON_CHANGE_ANNOTATION, before or "replace", after or "replace")
