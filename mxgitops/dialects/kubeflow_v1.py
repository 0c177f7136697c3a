"""kubeflow.org/v1 MXJob: Kubeflow's training operator, the current map form.

Run policy under `spec.runPolicy` or inline in `spec` (the form of the MXNet
operator's own v1, whose RunPolicy was embedded); the two must agree. That
operator defaulted cleanPodPolicy to All, Kubeflow's training operator to None,
which is kept (an inline form that does not say is warned of).
`schedulingPolicy` is read in both places too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxgitops.dialects.base import Reading, Version
from mxgitops.dialects.mapform import RUN_POLICY_FIELDS, read_map_form
from mxgitops.model import KUBEFLOW_KIND, Dialect, FieldProblem


def read(spec: Mapping[str, Any]) -> Reading:
    reading = read_map_form(spec, run_policy_fields=RUN_POLICY_FIELDS, nested_run_policy=True)
    inline = "runPolicy" not in spec and any(name in spec for name in RUN_POLICY_FIELDS)
    if inline and "cleanPodPolicy" not in spec:
        # The default stays the training operator's: the spec hash of these jobs with it.
        reading.warnings.append(
            FieldProblem(
                ("spec", "cleanPodPolicy"),
                "not set: read as None (Kubeflow's training operator's default, pods kept); "
                "mxnet-operator's own kubeflow.org/v1 defaulted it to All, the form of this "
                "inline run policy: set cleanPodPolicy to say which",
            )
        )
    return reading


VERSION = Version(
    Dialect.KUBEFLOW, KUBEFLOW_KIND, "mxjob-kubeflow-v1.json", "mxReplicaSpecs", read, current=True
)
