"""The map form of Kubeflow's operators: `spec.mxReplicaSpecs: {Scheduler|Server|Worker:
{replicas, restartPolicy, template}}`, shared by every version that wrote it.

Kubeflow's semantics hold: the replica's `restartPolicy` (default Never) is what
runs and overrides the pod template's, with a warning when the two differ. Run
policy fields are read under the names and in the places each version had
them. `schedulingPolicy` is understood: `priorityClass` goes onto every pod, and
the policy is kept on the reading: a `queue` runs the job on JobSet under
Kueue, and what neither runtime honours is warned about (spec.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxgitops.manifests.dialects.base import Reading, replica_count
from mxgitops.model import (
    DEFAULT_PS_ROOT_PORT,
    KUBEFLOW_PORT_NAME,
    KUBEFLOW_REPLICA_TYPES,
    CleanPodPolicy,
    FieldProblem,
    Path,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
    SuccessPolicy,
    mappings,
    mxnet_container,
)

# Written name -> RunPolicy attribute, as kubeflow.org/v1 spells them.
RUN_POLICY_FIELDS = {
    "cleanPodPolicy": "clean_pod_policy",
    "ttlSecondsAfterFinished": "ttl_seconds_after_finished",
    "activeDeadlineSeconds": "active_deadline_seconds",
    "backoffLimit": "backoff_limit",
    "suspend": "suspend",
}


def read_map_form(
    spec: Mapping[str, Any],
    *,
    run_policy_fields: Mapping[str, str],
    nested_run_policy: bool = False,
    defaults: Mapping[str, Any] | None = None,
) -> Reading:
    """Replica specs, run policy and success policy of one map-form version."""
    reading = Reading(replicas=[])
    reading.run_policy = _run_policy(
        spec, run_policy_fields, nested_run_policy, defaults or {}, reading.problems
    )
    priority_class = _scheduling_policy(spec, nested_run_policy, reading)
    seen: dict[str, str] = {}
    for type_name, raw in (spec.get("mxReplicaSpecs") or {}).items():
        path: Path = ("spec", "mxReplicaSpecs", type_name)
        canonical = type_name.title()  # `worker`, `WORKER`: the operators read `Worker`
        if canonical in seen:
            reading.problems.append(
                FieldProblem(
                    path,
                    f"the same replica type as {seen[canonical]} (the operator read keys in "
                    "any case); keep one",
                )
            )
            continue
        seen[canonical] = type_name
        template = raw.get("template") or {}
        policy = _restart_policy(raw.get("restartPolicy"), template, path, reading)
        if priority_class is not None:
            template = _with_priority_class(template, priority_class, path, reading.warnings)
        count, count_problems = replica_count(raw, path)
        reading.problems += count_problems
        reading.replicas.append(
            ReplicaSpec(
                type=KUBEFLOW_REPLICA_TYPES[canonical],
                replicas=count,
                restart_policy=policy,
                template=template,
                ps_root_port=scheduler_port(template),
                path=path,
            )
        )
    reading.success_policy = SuccessPolicy(spec.get("successPolicy", ""))
    return reading


def scheduler_port(template: Mapping[str, Any]) -> int:
    """Kubeflow names the scheduler's port `mxjob-port` on the mxnet container."""
    container = mxnet_container(template) or {}
    for port in mappings(container.get("ports") or []):
        if port.get("name") == KUBEFLOW_PORT_NAME:
            return int(port["containerPort"])
    return DEFAULT_PS_ROOT_PORT


def _restart_policy(
    declared: str | None, template: Mapping[str, Any], path: Path, reading: Reading
) -> RestartPolicy:
    """The replica's restart policy (default Never) wins over the template's."""
    if declared == "Always":
        reading.problems.append(
            FieldProblem(
                (*path, "restartPolicy"),
                "restartPolicy Always is not supported: each replica runs as a batch Job, "
                "use OnFailure or Never or ExitCode",
            )
        )
        return RestartPolicy.NEVER
    policy = RestartPolicy(declared) if declared is not None else RestartPolicy.NEVER
    in_template = (template.get("spec") or {}).get("restartPolicy")
    runs = RestartPolicy.NEVER if policy is RestartPolicy.EXIT_CODE else policy
    if in_template is not None and in_template != runs.value:
        source = (
            f"restartPolicy {policy}" if declared is not None else "default restartPolicy Never"
        )
        reading.warnings.append(
            FieldProblem(
                (*path, "template", "spec", "restartPolicy"),
                f"{in_template} is overridden: the replica's {source} is what runs, as in "
                "Kubeflow's training operator; remove it from the template or set the "
                "replica's restartPolicy",
            )
        )
    return policy


def _run_policy(
    spec: Mapping[str, Any],
    fields: Mapping[str, str],
    nested: bool,
    defaults: Mapping[str, Any],
    problems: list[FieldProblem],
) -> RunPolicy:
    """Run policy fields: under `runPolicy` (when `nested`) or inline in `spec`."""
    inner_policy: Mapping[str, Any] = (spec.get("runPolicy") or {}) if nested else {}
    values: dict[str, Any] = {}
    for name, attribute in fields.items():
        value = _one_of(spec, inner_policy, name, problems)
        if value is None:
            value = defaults.get(name)
        if value is not None:
            values[attribute] = value
    if "clean_pod_policy" in values:
        values["clean_pod_policy"] = CleanPodPolicy(values["clean_pod_policy"])
    return RunPolicy(**values)


def _one_of(
    spec: Mapping[str, Any], policy: Mapping[str, Any], name: str, problems: list[FieldProblem]
) -> Any:
    """A field that may stand inline in `spec` or under `spec.runPolicy`: they must agree."""
    inline, inner = spec.get(name), policy.get(name)
    if inline is not None and inner is not None and inline != inner:
        values = ("it", "") if isinstance(inline, Mapping) else (repr(inline), f" {inner!r}")
        problems.append(
            FieldProblem(
                ("spec", name),
                f"{values[0]} contradicts spec.runPolicy.{name}{values[1]}; set only one",
            )
        )
    return inner if inner is not None else inline


def _scheduling_policy(spec: Mapping[str, Any], nested: bool, reading: Reading) -> str | None:
    """The policy kept on the reading (its queue picks the runtime; spec.py warns about
    what the runtime cannot honour); the priority class for every pod."""
    if not nested:
        return None
    policy = _one_of(spec, spec.get("runPolicy") or {}, "schedulingPolicy", reading.problems)
    if not policy:
        return None
    where: Path = (
        ("spec", "runPolicy", "schedulingPolicy")
        if (spec.get("runPolicy") or {}).get("schedulingPolicy") is not None
        else ("spec", "schedulingPolicy")
    )
    reading.scheduling, reading.scheduling_path = dict(policy), where
    priority = policy.get("priorityClass")
    return str(priority) if priority else None


def _with_priority_class(
    template: Mapping[str, Any], priority_class: str, path: Path, warnings: list[FieldProblem]
) -> Mapping[str, Any]:
    """The template with `priorityClassName` set, unless it names its own (which wins)."""
    pod_spec: Mapping[str, Any] = template.get("spec") or {}
    own = pod_spec.get("priorityClassName")
    if own is None:
        return {**template, "spec": {**pod_spec, "priorityClassName": priority_class}}
    if own != priority_class:
        warnings.append(
            FieldProblem(
                (*path, "template", "spec", "priorityClassName"),
                f"{own} is this replica's priority class; schedulingPolicy.priorityClass "
                f"{priority_class} applies to the other replicas only",
            )
        )
    return template
