"""The batch runtime: the seed's `trainer` package, in Python, a job's objects and state.

The seed's names are all here (those both runtimes share live in `runtime/` and are
re-exported). `render_job` turns an MxJob into batch Jobs and (dist) a headless Service (pure);
`job_status` and `LiveJob.status` read the job's state back from objects
(pure), by Kubeflow's failure semantics (`status.py` states them);
`group_live` groups an instance's live objects by job. `TrainingJob` and
`MXReplicaSet` are the seed's façade over a `ClusterAPI`.
"""

from mxgitops.batch.inplace import compare as compare_in_place
from mxgitops.batch.job import TrainingJob
from mxgitops.batch.live import LiveJob, group_live
from mxgitops.batch.render import PS_ROOT_PORT_NAME, job_refs, render_job
from mxgitops.batch.replicaset import MXReplicaSet, MXReplicaSetInterface
from mxgitops.batch.status import job_status, replica_state
from mxgitops.model import NAMESPACE
from mxgitops.runtime.accelerators import (
    AcceleratorConfig,
    AcceleratorEnvVar,
    AcceleratorVolume,
    parse_accelerators,
)
from mxgitops.runtime.failure import Failure
from mxgitops.runtime.inplace import InPlace
from mxgitops.runtime.labels import (
    JOB_TYPE_LABEL,
    MXNET_LABEL,
    REPLICAS_ANNOTATION,
    RUNTIME_ID_LABEL,
    SUCCESS_POLICY_ANNOTATION,
    TASK_INDEX_LABEL,
    KubernetesLabels,
    job_labels,
    replica_labels,
    replica_set_labels,
)
from mxgitops.runtime.mxconfig import Address, MxConfig, dmlc_env
from mxgitops.runtime.pods import is_retryable_termination
from mxgitops.runtime.rendering import RenderContext
from mxgitops.runtime.state import MxReplicaStatus, ReplicaState, State

__all__ = [
    "JOB_TYPE_LABEL",
    "MXNET_LABEL",
    "NAMESPACE",
    "PS_ROOT_PORT_NAME",
    "REPLICAS_ANNOTATION",
    "RUNTIME_ID_LABEL",
    "SUCCESS_POLICY_ANNOTATION",
    "TASK_INDEX_LABEL",
    "AcceleratorConfig",
    "AcceleratorEnvVar",
    "AcceleratorVolume",
    "Address",
    "Failure",
    "InPlace",
    "KubernetesLabels",
    "LiveJob",
    "MXReplicaSet",
    "MXReplicaSetInterface",
    "MxConfig",
    "MxReplicaStatus",
    "RenderContext",
    "ReplicaState",
    "State",
    "TrainingJob",
    "compare_in_place",
    "dmlc_env",
    "group_live",
    "is_retryable_termination",
    "job_labels",
    "job_refs",
    "job_status",
    "parse_accelerators",
    "render_job",
    "replica_labels",
    "replica_set_labels",
    "replica_state",
]
