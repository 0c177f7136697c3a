"""A real Kubernetes control plane for the tests: etcd, kube-apiserver, the real
controllers and scheduler, built from the Go module proxy (``pin.py``, ``build.py``),
started on loopback (``launcher.py``), with a fake kubelet (``kubelet.py``) and a
harness with the API double's interface (``harness.py``); and a real node beside a
second one (``node.py``: kubelet, kube-proxy, containerd, runc, CNI and CoreDNS built
by ``nodebuild.py``, in the network namespace of ``netns.py``, running images made
here by ``images.py``, ``rootfs.py`` and ``projectimage.py``; its fixtures in
``fixtures.py``).

``python -m tests.controlplane --kubeconfig F [--audit-log F] [--node real]`` runs one until
killed and prints ``ready URL``, as ``python -m tests.kubeapi`` does for the double.
Where the double and this server differ, ``DIFFERENCES.md`` says how and what was done.
"""
