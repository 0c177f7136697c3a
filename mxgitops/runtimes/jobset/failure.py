"""Why a JobSet failed, read from its pods while they exist: pure.

As on the batch runtime (`batch/failure.py`): the failed replica's pod says what to
fix, its `mxnet` container's exit code, reason and termination message, first the one
that finished first; the JobSet's `Failed` condition adds its reason (the failure
policy's). Under `ExitCode` a pod a sidecar failed while `mxnet` exited 0 fails the job
too (`render.py`): then that container is named, and its log is the one read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mxgitops import objects
from mxgitops.model import CONTAINER_NAME
from mxgitops.runtimes.shared.failure import MAX_MESSAGE, Failure
from mxgitops.runtimes.shared.labels import JOB_TYPE_LABEL
from mxgitops.runtimes.shared.pods import last_terminated

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


def failure_of(condition: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> Failure:
    """The failure of a JobSet whose `Failed` condition is `condition`, from its `pods`
    (replica "JobSet" and no pod where none failed here)."""
    failed = [
        (p, CONTAINER_NAME, t)
        for p in pods
        if (t := last_terminated(p)) and int(t.get("exitCode", 0)) != 0
    ]
    failed = failed or [(p, *found) for p in pods if (found := _failed_sidecar(p))]
    reasons = []
    replica, exit_code, message, pod_name, container = "JobSet", None, "", "", CONTAINER_NAME
    if failed:
        pod, container, terminated = min(failed, key=lambda f: str(f[2].get("finishedAt")))
        labels = objects.labels_of(pod)
        replica = f"{labels.get(JOB_TYPE_LABEL, '?')} {labels.get(COMPLETION_INDEX_LABEL, '?')}"
        exit_code = int(terminated.get("exitCode", -1))
        reasons.append(str(terminated.get("reason") or ""))
        message = str(terminated.get("message") or "")
        pod_name = str((pod.get("metadata") or {}).get("name") or "")
    reasons.append(str(condition.get("reason") or ""))
    message = message or str(condition.get("message") or "")
    reason = "; ".join(dict.fromkeys(r for r in reasons if r))
    said = " ".join(message.split())[:MAX_MESSAGE]
    return Failure(replica, exit_code, reason, said, pod_name, container)


def _failed_sidecar(pod: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """The container other than `mxnet` that failed this failed pod, and how it ended."""
    if (pod.get("status") or {}).get("phase") != "Failed":
        return None
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated") or {}
        if status.get("name") != CONTAINER_NAME and int(terminated.get("exitCode") or 0) != 0:
            return str(status.get("name")), terminated
    return None
