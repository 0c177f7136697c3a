"""When a replica finished, and which came first: a job's success or a failure. Pure.

Kubeflow's operator acted on each pod event: once its MXJob Succeeded (the deciding
replica set done), a later failure (a server killed as the scheduler exits) changed
nothing, and once it Failed, a later success neither. A sync sees both at once, so
it reads when each happened: the `mxnet` container's `finishedAt`, else the batch
Job's `completionTime` or `Failed` condition. RFC 3339 UTC, as the API server writes
it, sorts as text. A failure at a time not known, or in the same second as the success
(RFC 3339 has no finer), fails the job, as a sync that saw only the failure would have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mxgitops.runtimes.shared.pods import mxnet_terminated


def finished_at(
    batch_job: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]], *, failed: bool
) -> str | None:
    """When one replica succeeded (`failed`: failed): the latest `finishedAt` of its pods
    that did, else its batch Job's completionTime (Failed condition); None: not known."""
    phase = "Failed" if failed else "Succeeded"
    times = [
        str(at)
        for pod in pods
        if (pod.get("status") or {}).get("phase") == phase
        and (at := mxnet_terminated(pod).get("finishedAt"))
    ]
    if times:
        return max(times)
    status: Mapping[str, Any] = (batch_job or {}).get("status") or {}
    if not failed:
        return str(status["completionTime"]) if status.get("completionTime") else None
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Failed" and condition.get("lastTransitionTime"):
            return str(condition["lastTransitionTime"])
    return None


def succeeded_first(succeeded: Sequence[str | None], failed: Sequence[str | None]) -> bool:
    """Whether every replica of the deciding set (`succeeded`: when each did; None: it
    did not, or not known when) finished before the first of the `failed` replicas."""
    done = [t for t in succeeded if t is not None]
    failures = [t for t in failed if t is not None]
    if not done or len(done) < len(succeeded) or not failures or len(failures) < len(failed):
        return False
    return max(done) < min(failures)
