"""A real Kubernetes control plane for the tests: etcd, kube-apiserver, the real
controllers and scheduler, built from the Go module proxy (``pin.py``, ``build.py``),
started on loopback (``launcher.py``), with a fake kubelet (``kubelet.py``) and a
harness with the API double's interface (``harness.py``).

``python -m tests.controlplane --kubeconfig F [--audit-log F]`` runs one until
killed and prints ``ready URL``, as ``python -m tests.kubeapi`` does for the double.
Where the double and this server differ, ``DIFFERENCES.md`` says how and what was done.
"""
