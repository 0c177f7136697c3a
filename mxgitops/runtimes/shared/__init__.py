"""What every runtime shares, and what the rest of mxgitops sees of one.

`base.py`: the `Runtime` protocol each runtime implements (`batch/`, `jobset/`) and the
`Live` reading interface of their live groups; `state.py`, `failure.py`, `inplace.py`,
`rendering.py`: the neutral types (`State`, `Failure`, `InPlace`, `RenderContext`);
`pods.py`, `disruption.py`, `labels.py`, `mxconfig.py`, `accelerators.py`: what both
runtimes do alike to a pod (read its `mxnet` container, its disruption, its labels, its
DMLC environment, its accelerators). Nothing here imports a runtime; `runtimes/registry.py` is
the registry that does (import-linter's layers contract).
"""
