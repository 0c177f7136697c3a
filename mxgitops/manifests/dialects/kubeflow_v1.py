"""kubeflow.org/v1 MXJob: Kubeflow's training operator, the current map form.

Run policy under `spec.runPolicy` or inline in `spec` (the form of the MXNet
operator's own v1, whose RunPolicy was embedded); the two must agree. That
operator defaulted cleanPodPolicy to All, Kubeflow's training operator to None:
each form gets its own operator's. The inline form's All is hashed as unset
(`RunPolicy.clean_pod_policy_defaulted`): earlier versions read None there, and the
jobs they synced keep their spec hashes, so none is replaced by the upgrade, and a
finished one, recorded in the ledger, is cleaned, never run again.
`schedulingPolicy` is read in both places too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mxgitops.manifests.dialects.base import Reading, Version
from mxgitops.manifests.dialects.mapform import RUN_POLICY_FIELDS, read_map_form
from mxgitops.model import KUBEFLOW_KIND, CleanPodPolicy, Dialect, FieldProblem


def read(spec: Mapping[str, Any]) -> Reading:
    reading = read_map_form(spec, run_policy_fields=RUN_POLICY_FIELDS, nested_run_policy=True)
    inline = "runPolicy" not in spec and any(name in spec for name in RUN_POLICY_FIELDS)
    if inline and "cleanPodPolicy" not in spec:
        reading.run_policy = replace(
            reading.run_policy,
            clean_pod_policy=CleanPodPolicy.ALL,
            clean_pod_policy_defaulted=True,
        )
        reading.warnings.append(
            FieldProblem(
                ("spec", "cleanPodPolicy"),
                "not set: read as All, mxnet-operator's own default for this inline run "
                "policy (a finished job's pods are deleted; Kubeflow's training operator, "
                "runPolicy nested, kept them): set cleanPodPolicy to say which",
            )
        )
    return reading


VERSION = Version(
    Dialect.KUBEFLOW, KUBEFLOW_KIND, "mxjob-kubeflow-v1.json", "mxReplicaSpecs", read, current=True
)
