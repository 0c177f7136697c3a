"""The labels and annotations that tie each Kubernetes object to its job.

Labels are what the cluster can select on: the seed's `mxnet.mlkube.io`,
`job_type`, `runtime_id` and `task_index`, plus this project's ownership labels
and the job name. Together they address one replica's pod exactly, which is how
the scheduler Service finds its pod and how status finds a replica's pods.

`job_type` carries the replica type as the seed wrote it (`SCHEDULER`,
`SERVER`, `WORKER`): it parses straight back into `ReplicaType`. Object names
use the lower-case role instead, because names must be DNS labels.

Annotations carry what selection does not need but reading a live job back
does: the spec hash, source and commit (names in `objects.py`), and the job's
shape (replicas per type, success policy), so a live job's status can be
judged without its manifest.
"""

from __future__ import annotations

from mxgitops import model, objects
from mxgitops.model import ON_CHANGE_ANNOTATION, MxJob, OnChange, ReplicaType, SuccessPolicy

MXNET_LABEL = "mxnet.mlkube.io"
JOB_TYPE_LABEL = "job_type"
RUNTIME_ID_LABEL = "runtime_id"
TASK_INDEX_LABEL = "task_index"

# "SCHEDULER=1,SERVER=2,WORKER=3": every replica set of the job, on every object.
REPLICAS_ANNOTATION = "mxgitops.io/replicas"
# On each batch Job: its replica's restart policy (`ExitCode` included), which the
# status rules follow; a LIST leaves out the pod template that also says it.
RESTART_POLICY_ANNOTATION = "mxgitops.io/restart-policy"
# Present only when the job's success policy is not the default.
SUCCESS_POLICY_ANNOTATION = model.SUCCESS_POLICY_ANNOTATION

# A `job_type` label or annotation part to its type, in replica order: a dict lookup,
# where `ReplicaType(...)` and `__members__` cost an enum call for every object read.
REPLICA_TYPES: dict[str, ReplicaType] = {t.value: t for t in ReplicaType}


class KubernetesLabels(dict[str, str]):
    """A set of labels to put on Kubernetes objects (the seed's KubernetesLabels)."""

    def to_selector(self) -> str:
        """An equality selector matching exactly these labels, keys sorted.

        Sorting keeps the selector, and every request built from it, deterministic.
        An empty value (`mxnet.mlkube.io=`) is a valid equality requirement.
        """
        return ",".join(f"{key}={value}" for key, value in sorted(self.items()))


def job_labels(job: MxJob, instance: str) -> KubernetesLabels:
    """Labels on every object of this runtime of the job."""
    return KubernetesLabels(
        {
            **objects.ownership_labels(instance),
            objects.JOB_NAME_LABEL: job.name,
            MXNET_LABEL: "",
            RUNTIME_ID_LABEL: job.runtime_id,
        }
    )


def replica_set_labels(job: MxJob, instance: str, replica_type: ReplicaType) -> KubernetesLabels:
    """Labels on every object of one replica set (the seed's MXReplicaSet.Labels)."""
    return KubernetesLabels({**job_labels(job, instance), JOB_TYPE_LABEL: replica_type.value})


def replica_labels(
    job: MxJob, instance: str, replica_type: ReplicaType, index: int
) -> KubernetesLabels:
    """Labels of one replica: its batch Job, its pods and (scheduler) its Service."""
    return KubernetesLabels(
        {**replica_set_labels(job, instance, replica_type), TASK_INDEX_LABEL: str(index)}
    )


# Kubeflow's training operator put these on every pod it made (`createNewPod`), so
# selectors written for its pods (anti-affinity, NetworkPolicies, PodMonitors, log
# selectors) match mxgitops' pods too. mxgitops' own labels stay what owns them.
KUBEFLOW_JOB_NAME_LABEL = "training.kubeflow.org/job-name"
KUBEFLOW_REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
KUBEFLOW_REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
KUBEFLOW_OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
KUBEFLOW_JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
# Not the operator's `mxjob-controller`: that operator, where it runs too, selects (and
# would adopt) the pods labelled with its own name and a job's name.
KUBEFLOW_OPERATOR_NAME = "mxgitops"


def kubeflow_pod_labels(job: MxJob, replica_type: ReplicaType, index: int | None) -> dict[str, str]:
    """The operator's labels of one replica's pods (`index` None: a template shared by
    the replica set's pods, which cannot carry each one's index). `job-role: master`
    on the Servers, as the MXJob controller's IsMasterRole said."""
    labels = {
        KUBEFLOW_JOB_NAME_LABEL: job.name,
        KUBEFLOW_REPLICA_TYPE_LABEL: replica_type.role,
        KUBEFLOW_OPERATOR_NAME_LABEL: KUBEFLOW_OPERATOR_NAME,
    }
    if index is not None:
        labels[KUBEFLOW_REPLICA_INDEX_LABEL] = str(index)
    if replica_type is ReplicaType.SERVER:
        labels[KUBEFLOW_JOB_ROLE_LABEL] = "master"
    return labels


def shape_annotations(job: MxJob) -> dict[str, str]:
    """The job's shape, so status can be read back from live objects alone."""
    annotations = {
        REPLICAS_ANNOTATION: ",".join(f"{r.type.value}={r.replicas}" for r in job.replica_specs)
    }
    if job.success_policy is not SuccessPolicy.SCHEDULER:
        annotations[SUCCESS_POLICY_ANNOTATION] = job.success_policy.value
    if job.on_change is OnChange.WAIT:  # a job whose manifest is gone still says "wait"
        annotations[ON_CHANGE_ANNOTATION] = job.on_change.value
    return annotations


def parse_replicas_annotation(value: str) -> dict[ReplicaType, int]:
    """Inverse of the REPLICAS_ANNOTATION format; malformed parts are ignored."""
    counts: dict[ReplicaType, int] = {}
    for part in value.split(","):
        type_name, _, count = part.partition("=")
        replica_type = REPLICA_TYPES.get(type_name)
        if replica_type is not None and count.isdigit():
            counts[replica_type] = int(count)
    return counts
