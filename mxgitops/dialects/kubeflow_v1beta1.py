"""kubeflow.org/v1beta1 MXJob: the MXNet operator's v1beta1 (2019).

The map form with `jobMode` (MXTrain; MXTune is refused), `successPolicy`,
and the run policy inline: `cleanPodPolicy` (that operator's default: All, made
explicit here) and `ttlSecondsAfterFinished`. A replica's `label` was the key
of TVM auto-tuning servers: it has no effect on training, so it gets a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxgitops.dialects.base import Reading, Version
from mxgitops.dialects.mapform import read_map_form
from mxgitops.model import KUBEFLOW_KIND, Dialect, FieldProblem

RUN_POLICY_FIELDS = {
    "cleanPodPolicy": "clean_pod_policy",
    "ttlSecondsAfterFinished": "ttl_seconds_after_finished",
}
DEFAULTS = {"cleanPodPolicy": "All"}


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
    Dialect.KUBEFLOW_V1BETA1, KUBEFLOW_KIND, "mxjob-kubeflow-v1beta1.json", "mxReplicaSpecs", read
)
