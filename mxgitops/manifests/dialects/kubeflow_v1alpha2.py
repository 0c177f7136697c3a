"""kubeflow.org/v1alpha2 MXJob: the first map form (mxnet-operator.v2, 2018).

No `jobMode` and no `successPolicy` yet; the run policy inline:
`cleanPodPolicy` (that operator's default: Running, made explicit here) and
the TTL under its first spelling, `ttlSecondsAfterFinishing`.

That operator's decoder ignored fields it did not know, and published examples
set `jobMode: MXTrain` (the field of later versions): it ran them, as training
whatever the value said, so `jobMode` is accepted here with a warning that it
has no effect, `MXTune` included (`spec.refusals` refuses it in other versions).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxgitops.manifests.dialects.base import Reading, Version
from mxgitops.manifests.dialects.mapform import read_map_form
from mxgitops.model import KUBEFLOW_KIND, Dialect, FieldProblem

RUN_POLICY_FIELDS = {
    "cleanPodPolicy": "clean_pod_policy",
    "ttlSecondsAfterFinishing": "ttl_seconds_after_finished",
}
DEFAULTS = {"cleanPodPolicy": "Running"}


def read(spec: Mapping[str, Any]) -> Reading:
    reading = read_map_form(spec, run_policy_fields=RUN_POLICY_FIELDS, defaults=DEFAULTS)
    if "jobMode" in spec:
        reading.warnings.append(
            FieldProblem(
                ("spec", "jobMode"),
                f"jobMode {spec['jobMode']} has no effect in kubeflow.org/v1alpha2 (that "
                "operator ignored the field and ran the job as training, as mxgitops does); "
                "it arrived with kubeflow.org/v1beta1",
            )
        )
    return reading


VERSION = Version(
    Dialect.KUBEFLOW_V1ALPHA2, KUBEFLOW_KIND, "mxjob-kubeflow-v1alpha2.json", "mxReplicaSpecs", read
)
