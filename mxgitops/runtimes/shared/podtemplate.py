"""What every runtime's rendering shares: pure.

The context a job is rendered in (`RenderContext`), the annotations on every object of
a job, a pod template's copy (the user's template is never mutated), and the pod
failure policy of a replica's Job (whichever runtime makes that Job: a batch Job of
its own, or a JobSet's child Job), by its restart policy (`batch/status.py` states the
failure semantics).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mxgitops import objects
from mxgitops.model import CONTAINER_NAME, MxJob, RestartPolicy
from mxgitops.objects import Kind
from mxgitops.runtimes.shared.accelerators import AcceleratorConfig
from mxgitops.runtimes.shared.disruption import pod_failure_rule
from mxgitops.runtimes.shared.labels import shape_annotations
from mxgitops.runtimes.shared.pods import PERMANENT_EXIT_CODES


@dataclass(frozen=True)
class RenderContext:
    """What rendering needs besides the job: who owns the objects, from which commit."""

    instance: str
    commit: str = ""
    accelerators: Mapping[str, AcceleratorConfig] = field(default_factory=dict)
    # The names of the cluster-scoped objects of the kinds a runtime renders by (such
    # as a queue's priority classes: given by name only where one exists), read once
    # per sync where a job needs them (`runtimes.names_needed`).
    names: Mapping[Kind, frozenset[str]] = field(default_factory=dict)


def pod_failure_policy(
    restart: RestartPolicy, *, dist: bool, extra: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The `podFailurePolicy` of a replica's Job's spec, as a dict to update the spec
    with (empty where it has none: `OnFailure`); `extra`: a runtime's own rules after
    the shared ones."""
    rules = pod_failure_rules(restart, dist=dist) + list(extra)
    return {"podFailurePolicy": {"rules": rules}} if rules else {}


def pod_failure_rules(restart: RestartPolicy, *, dist: bool) -> list[dict[str, Any]]:
    """A replica's batch Job's podFailurePolicy rules (Kubernetes allows them only for
    pods with restartPolicy Never, so none under `OnFailure`): a disruption first
    (`disruption.py`), then `ExitCode`'s permanent exit codes."""
    if restart is RestartPolicy.ON_FAILURE:
        return []
    rules = [pod_failure_rule(dist)]
    if restart is RestartPolicy.EXIT_CODE:
        rules.append(
            {
                "action": "FailJob",
                "onExitCodes": {
                    "containerName": CONTAINER_NAME,
                    "operator": "In",
                    "values": list(PERMANENT_EXIT_CODES),
                },
            }
        )
    return rules


def object_annotations(job: MxJob, ctx: RenderContext) -> dict[str, str]:
    """Annotations on every object of the job (empty source or commit are left out)."""
    values = {
        objects.SPEC_HASH_ANNOTATION: job.spec_hash,
        objects.SOURCE_ANNOTATION: job.source_path,
        objects.COMMIT_ANNOTATION: ctx.commit,
        **shape_annotations(job),
    }
    return {key: value for key, value in values.items() if value}


def copied_template(value: Any) -> Any:
    """A deep copy of a pod template (`_copied`), for the other runtimes."""
    return _copied(value)


def _copied(value: Any) -> Any:
    """A deep copy of a template: its dicts and lists copied (all a manifest's YAML or
    JSON makes, besides scalars, which are immutable and shared); anything else by
    `copy.deepcopy`. Several times faster than deepcopy's memo for every node."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return copy.deepcopy(value)
