"""kubeflow.org/v1 MXJob: Kubeflow's training operator, the current map form.

Run policy under `spec.runPolicy` or inline in `spec` (the form of the MXNet
operator's own v1, whose RunPolicy was embedded); the two must agree.
`schedulingPolicy` is read in both places too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxgitops.dialects.base import Reading, Version
from mxgitops.dialects.mapform import RUN_POLICY_FIELDS, read_map_form
from mxgitops.model import KUBEFLOW_KIND, Dialect


def read(spec: Mapping[str, Any]) -> Reading:
    return read_map_form(spec, run_policy_fields=RUN_POLICY_FIELDS, nested_run_policy=True)


VERSION = Version(
    Dialect.KUBEFLOW, KUBEFLOW_KIND, "mxjob-kubeflow-v1.json", "mxReplicaSpecs", read, current=True
)
