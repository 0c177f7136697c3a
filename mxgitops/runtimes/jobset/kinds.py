"""The kinds only the JobSet runtime reads or writes, defined here so that nothing
outside this package names them (`objects.Kind.define`)."""

from __future__ import annotations

from mxgitops.objects import Kind
from mxgitops.runtimes.shared.livecheck import CONDITIONS, COUNTS

# jobset.x-k8s.io/v1alpha2: the runtime's one object per job. Its replicatedJobs (pod
# templates, where Kueue injects what it admits with) are never read: its in-place
# fields, metadata and status are.
JOBSET = Kind.define(
    "JobSet",
    "/apis/jobset.x-k8s.io/v1alpha2",
    "jobsets",
    unread=(("spec", "replicatedJobs"),),
    tenant=True,
    status={
        "conditions": CONDITIONS,
        "replicatedJobsStatus": [{"name": str, **dict.fromkeys(COUNTS, int)}],
    },
)
# kueue.x-k8s.io/v1beta2: Kueue's, read for why a job waits, and patched (spec.active)
# to suspend a queued job: one of the job's objects, as the tenant.
WORKLOAD = Kind.define(
    "Workload",
    "/apis/kueue.x-k8s.io/v1beta2",
    "workloads",
    unread=(("spec", "podSets"),),
    tenant=True,
    status={"conditions": CONDITIONS, "clusterName": str},
)
# Kueue's, read by name: a queued job's priority class is given to Kueue where one exists.
WORKLOAD_PRIORITY_CLASS = Kind.define(
    "WorkloadPriorityClass", "/apis/kueue.x-k8s.io/v1beta2", "workloadpriorityclasses"
)
# Kueue's, on a MultiKueue manager: whether it reaches a worker (its Active condition).
# Read beside the instance's objects, not one of them.
MULTIKUEUE_CLUSTER = Kind.define(
    "MultiKueueCluster",
    "/apis/kueue.x-k8s.io/v1beta2",
    "multikueueclusters",
    status={"conditions": [{**CONDITIONS[0], "lastTransitionTime": str}]},
    ours=False,
)
