"""The JobSet runtime: one MxJob as one JobSet (jobset.x-k8s.io/v1alpha2), admitted whole
by Kueue when it names a queue; a sibling of `batch/` with the same duties (`runtime/base.py`).

`render_jobset` turns an MxJob into its JobSet (pure); `group_live_jobsets` groups an
instance's live JobSets, their pods and Kueue's Workloads by job, and `LiveJobSet`
reads each one's state and failure back (pure). `mxgitops.runtimes.registry` is the seam that
picks between this runtime and the batch one.
"""

from mxgitops.runtimes.jobset.failure import JOBSET_NAME_LABEL
from mxgitops.runtimes.jobset.live import (
    LiveJobSet,
    created_jobsets,
    group_live_jobsets,
    is_jobset_pod,
)
from mxgitops.runtimes.jobset.render import (
    API_VERSION,
    jobset_refs,
    render_jobset,
    scheduler_address,
)

__all__ = [
    "API_VERSION",
    "JOBSET_NAME_LABEL",
    "LiveJobSet",
    "created_jobsets",
    "group_live_jobsets",
    "is_jobset_pod",
    "jobset_refs",
    "render_jobset",
    "scheduler_address",
]
