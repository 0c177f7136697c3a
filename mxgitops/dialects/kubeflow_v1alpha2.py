"""kubeflow.org/v1alpha2 MXJob: the first map form (mxnet-operator.v2, 2018).

No `jobMode` and no `successPolicy` yet; the run policy inline:
`cleanPodPolicy` (that operator's default: Running, made explicit here) and
the TTL under its first spelling, `ttlSecondsAfterFinishing`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxgitops.dialects.base import Reading, Version
from mxgitops.dialects.mapform import read_map_form
from mxgitops.model import KUBEFLOW_KIND, Dialect

RUN_POLICY_FIELDS = {
    "cleanPodPolicy": "clean_pod_policy",
    "ttlSecondsAfterFinishing": "ttl_seconds_after_finished",
}
DEFAULTS = {"cleanPodPolicy": "Running"}


def read(spec: Mapping[str, Any]) -> Reading:
    return read_map_form(spec, run_policy_fields=RUN_POLICY_FIELDS, defaults=DEFAULTS)


VERSION = Version(
    Dialect.KUBEFLOW_V1ALPHA2, KUBEFLOW_KIND, "mxjob-kubeflow-v1alpha2.json", "mxReplicaSpecs", read
)
