"""Which queue a manifest names for its job: Kueue's label, or Kubeflow's
`schedulingPolicy.queue`.

A job that names a queue runs on the runtime a queue admits (`runtimes.runtime_for`),
and the queue is part of its spec hash there. What each runtime cannot honour of the
rest of a schedulingPolicy, and the names it derives from a job, are the runtime's
(`Runtime.scheduling_warnings`, `Runtime.name_problems`). Pure: used by `spec.py` while
a manifest is read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mxgitops.model import FieldProblem, Path

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_QUEUE_NAME = 63  # it is a label's value (Kueue's queue-name)


def queue_of(
    labels: Mapping[str, Any], scheduling: Mapping[str, Any], where: Path
) -> tuple[str, list[FieldProblem], list[FieldProblem]]:
    """The job's queue, problems and warnings: Kueue's label, else schedulingPolicy.queue.

    Where both name a queue and differ, the label wins (it is Kueue's own; Kubeflow's
    `queue` often named a Volcano queue), and the other is said to be unused."""
    from_policy = str(scheduling.get("queue") or "")
    from_label = str(labels.get(QUEUE_LABEL) or "")
    warnings = []
    if from_policy and from_label and from_policy != from_label:
        warnings.append(
            FieldProblem(
                (*where, "queue"),
                f"queue {from_policy!r} is not used: the label {QUEUE_LABEL} names the "
                f"job's Kueue queue, {from_label!r}",
            )
        )
    queue = from_label or from_policy
    problems = []
    if queue and not (len(queue) <= MAX_QUEUE_NAME and _DNS1123_LABEL.match(queue)):
        problems.append(
            FieldProblem(
                ("metadata", "labels", QUEUE_LABEL) if from_label else (*where, "queue"),
                f"{queue!r} is not a LocalQueue name (a DNS-1123 label: lower-case letters, "
                f"digits and '-', at most {MAX_QUEUE_NAME} characters)",
            )
        )
    return queue, problems, warnings
