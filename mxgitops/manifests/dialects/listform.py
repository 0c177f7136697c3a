"""The list form of the seed operator: `spec.replicaSpecs: [{mxReplicaType, replicas,
PsRootPort, template}]`, shared by every version that wrote it.

The restart policy is the pod template's (default OnFailure, as the seed's
pods had); `jobMode: local|dist` is kept as declared and checked by the rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxgitops.manifests.dialects.base import Reading, canonical_keys, replica_count
from mxgitops.model import (
    DEFAULT_PS_ROOT_PORT,
    FieldProblem,
    JobMode,
    Path,
    ReplicaSpec,
    ReplicaType,
    RestartPolicy,
    SuccessPolicy,
    format_path,
)

SPEC_FIELDS = ("jobMode", "replicaSpecs")
REPLICA_FIELDS = ("replicas", "mxReplicaType", "PsRootPort", "template")


def read_list_form(spec: Mapping[str, Any], *, any_case: bool = False) -> Reading:
    """The replica specs and declared mode; `any_case`: field names in any case."""
    reading = Reading(replicas=[])
    if any_case:
        spec, reading.problems = canonical_keys(spec, SPEC_FIELDS, ("spec",), reading.warnings)
    seen: dict[ReplicaType, Path] = {}
    for index, raw in enumerate(spec.get("replicaSpecs") or []):
        path: Path = ("spec", "replicaSpecs", index)
        if any_case:
            raw, key_problems = canonical_keys(raw, REPLICA_FIELDS, path, reading.warnings)
            reading.problems += key_problems
        replica_type = ReplicaType(raw.get("mxReplicaType", ReplicaType.WORKER.value))
        if replica_type in seen:
            reading.problems.append(
                FieldProblem(
                    (*path, "mxReplicaType"),
                    f"{replica_type} appears twice (also at {format_path(seen[replica_type])})",
                )
            )
            continue
        seen[replica_type] = path
        template = raw.get("template") or {}
        policy, policy_problems = template_restart_policy(template, path)
        count, count_problems = replica_count(raw, path)
        reading.problems += policy_problems + count_problems
        reading.replicas.append(
            ReplicaSpec(
                type=replica_type,
                replicas=count,
                restart_policy=policy,
                template=template,
                ps_root_port=int(raw.get("PsRootPort", DEFAULT_PS_ROOT_PORT)),
                path=path,
            )
        )
    if spec.get("jobMode") in (JobMode.LOCAL.value, JobMode.DIST.value):
        reading.mode = JobMode(spec["jobMode"])
    # Not in the list form's schema; read for documents built in code (as the model allows).
    reading.success_policy = SuccessPolicy(spec.get("successPolicy", ""))
    return reading


def template_restart_policy(
    template: Mapping[str, Any], path: Path
) -> tuple[RestartPolicy, list[FieldProblem]]:
    """The pod template's restart policy: OnFailure (default) or Never."""
    value = (template.get("spec") or {}).get("restartPolicy")
    if value is None:
        return RestartPolicy.ON_FAILURE, []
    allowed = [RestartPolicy.ON_FAILURE.value, RestartPolicy.NEVER.value]
    if value not in allowed:
        problem = FieldProblem(
            (*path, "template", "spec", "restartPolicy"),
            f"restartPolicy {value} is not supported: each replica runs as a batch Job, "
            f"use {' or '.join(allowed)}",
        )
        return RestartPolicy.ON_FAILURE, [problem]
    return RestartPolicy(value), []
