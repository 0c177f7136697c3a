"""A Job made from a CronJob, as `kubectl create job --from=cronjob/NAME` makes it, and
what the receiver reads of the CronJob's Jobs. Pure.

kubectl v1.34's `createJobFromCronJob` (k8s.io/kubectl pkg/cmd/create/create_job.go):
the jobTemplate's spec as it is, its labels, its annotations over
`cronjob.kubernetes.io/instantiate: manual`, and an owner reference to the CronJob
with `controller: true` and no `blockOwnerDeletion` (which would need the
cronjobs/finalizers permission). The garbage collector then deletes the Job with
its CronJob, and `kubectl get jobs` shows it beside the scheduled runs.

The receiver adds one annotation, `mxgitops.io/push`, naming the forge, the delivery
and the commit: a Job started by a push says which. Its name says it too:
`<cronjob>-push-<10 hex digits of the delivery>`, so the same delivery always
names the same Job, and a create retried (or sent again after a restart) finds
it made instead of starting a second sync.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

from mxgitops.objects import KubeObject

INSTANTIATE_ANNOTATION = "cronjob.kubernetes.io/instantiate"
PUSH_ANNOTATION = "mxgitops.io/push"
NAME_LIMIT = 63  # a Job's name is its pods' job-name label value
_SUFFIX = "-push-"
_DIGITS = 10


def push_job_name(cronjob: str, delivery: str) -> str:
    """`<cronjob>-push-<digest>`, within a label value's 63 characters."""
    digest = hashlib.sha256(delivery.encode()).hexdigest()[:_DIGITS]
    prefix = cronjob[: NAME_LIMIT - len(_SUFFIX) - _DIGITS].rstrip("-.")
    return f"{prefix}{_SUFFIX}{digest}"


def job_from_cronjob(cronjob: Mapping[str, Any], name: str, push: str) -> KubeObject:
    """The Job kubectl would create from `cronjob` under `name`, with `push` (what
    started it) in the `mxgitops.io/push` annotation."""
    metadata = cronjob["metadata"]
    template = cronjob["spec"]["jobTemplate"]
    template_metadata = template.get("metadata") or {}
    annotations = {INSTANTIATE_ANNOTATION: "manual", **(template_metadata.get("annotations") or {})}
    annotations[PUSH_ANNOTATION] = push
    job_metadata: KubeObject = {
        "name": name,
        "namespace": metadata["namespace"],
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "name": metadata["name"],
                "uid": metadata["uid"],
                "controller": True,
            }
        ],
    }
    if template_metadata.get("labels"):
        job_metadata["labels"] = dict(template_metadata["labels"])
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": job_metadata,
        "spec": copy.deepcopy(template["spec"]),
    }


def controlled_by(job: Mapping[str, Any], cronjob: str) -> bool:
    """Whether `job` is one of the CronJob's runs: scheduled, made by kubectl or by a push."""
    owners = (job.get("metadata") or {}).get("ownerReferences") or []
    return any(
        o.get("kind") == "CronJob" and o.get("name") == cronjob and o.get("controller")
        for o in owners
    )


def finished(job: Mapping[str, Any]) -> bool:
    """Whether the Job ended: a Complete or Failed condition that is True (being deleted
    counts too: its pod is going)."""
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return True
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions
    )


def suspended(cronjob: Mapping[str, Any]) -> bool:
    """Whether the CronJob is suspended (`spec.suspend: true`): its operator stopped it,
    and no push starts a run of it either."""
    spec = cronjob.get("spec")
    return isinstance(spec, dict) and spec.get("suspend") is True
