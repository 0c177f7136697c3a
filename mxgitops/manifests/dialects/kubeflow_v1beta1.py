"""kubeflow.org/v1beta1 MXJob: the MXNet operator's v1beta1 (2019).

The map form with `jobMode` (MXTrain; MXTune is refused), `successPolicy`,
and the run policy inline: `cleanPodPolicy` (that operator's default: All, made
explicit here) and `ttlSecondsAfterFinished`. A replica's `label` was the key
of TVM auto-tuning servers: it has no effect on training, so it gets a warning.

Verified against kubeflow/mxnet-operator `pkg/apis/mxnet/v1beta1/types.go` at
every revision it had: f1df1f65aaed (#24, 2019-03-19) and ee6c3419aef9 (#84,
2020-07-18, which added `successPolicy`; unchanged to the repository's last
commit cdc8dd557580):
https://github.com/kubeflow/mxnet-operator/blob/ee6c3419aef9738976465bc79adf4e11073f3fcc/pkg/apis/mxnet/v1beta1/types.go
MXJobSpec: cleanPodPolicy, successPolicy, ttlSecondsAfterFinished (int32),
jobMode, mxReplicaSpecs; MXReplicaSpec: replicas, label, template,
restartPolicy (Always|OnFailure|Never|ExitCode, default Never). That version
never had `activeDeadlineSeconds` or `backoffLimit`: #40 (60209ec7efd8) added
them to v1's MXJobSpec only, and the v1beta1 operator ignored them. They are
refused here as unknown fields, not enforced: the job would otherwise run
differently from how its operator ran it; `kubeflow.org/v1` has them, and the
message says so (`UNKNOWN_FIELD_HINTS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxgitops.manifests.dialects.base import Reading, Version
from mxgitops.manifests.dialects.mapform import read_map_form
from mxgitops.model import KUBEFLOW_API_VERSION, KUBEFLOW_KIND, Dialect, FieldProblem, Path

RUN_POLICY_FIELDS = {
    "cleanPodPolicy": "clean_pod_policy",
    "ttlSecondsAfterFinished": "ttl_seconds_after_finished",
}
DEFAULTS = {"cleanPodPolicy": "All"}
UNKNOWN_FIELD_HINTS: dict[Path, str] = {
    ("spec", name): (
        f"{Dialect.KUBEFLOW_V1BETA1.value} has no such field (its operator ignored it); "
        f"it exists from {KUBEFLOW_API_VERSION}, as spec.runPolicy.{name}: remove it here, "
        f"run mxgitops convert FILE to rewrite the manifest in {KUBEFLOW_API_VERSION}, "
        "then set it there"
    )
    for name in ("activeDeadlineSeconds", "backoffLimit")  # v1's only (#40)
}


def read(spec: Mapping[str, Any]) -> Reading:
    reading = read_map_form(spec, run_policy_fields=RUN_POLICY_FIELDS, defaults=DEFAULTS)
    for type_name, raw in (spec.get("mxReplicaSpecs") or {}).items():
        if raw.get("label") is not None:
            reading.warnings.append(
                FieldProblem(
                    ("spec", "mxReplicaSpecs", type_name, "label"),
                    "label is the key of a TVM auto-tuning server (MXTune); a training job "
                    "does not use it, and mxgitops ignores it",
                )
            )
    return reading


VERSION = Version(
    Dialect.KUBEFLOW_V1BETA1,
    KUBEFLOW_KIND,
    "mxjob-kubeflow-v1beta1.json",
    "mxReplicaSpecs",
    read,
    unknown_field_hints=UNKNOWN_FIELD_HINTS,
)
