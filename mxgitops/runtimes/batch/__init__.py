"""The batch runtime: the seed's `trainer` package, in Python, a job's objects and state.

`render.py` turns an MxJob into batch Jobs and (dist) a headless Service (pure);
`status.py` and `live.py` read the job's state back from objects (pure), by Kubeflow's
failure semantics (`status.py` states them), and group an instance's live objects by
job; `registered.py` is what the registry calls. What both runtimes share (labels,
MX_CONFIG, accelerators, states) lives in `runtimes/shared/`.
"""
