"""The JobSet runtime: one MxJob as one JobSet (jobset.x-k8s.io/v1alpha2), admitted whole
by Kueue when it names a queue; a sibling of `batch/` with the same duties
(`runtimes/shared/base.py`).

`render.py` turns an MxJob into its JobSet (pure); `grouping.py` groups an instance's
live JobSets, their pods and Kueue's Workloads by job, and `live.py`'s `LiveJobSet`
reads each one's state and failure back (pure); `registered.py` is what the registry
(`mxgitops.runtimes.registry`, the seam that picks between this runtime and the batch
one) knows of it.
"""
