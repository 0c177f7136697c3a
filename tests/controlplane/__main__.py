"""``python -m tests.controlplane --kubeconfig PATH [--audit-log PATH] [--dir DIR]
[--node fake|real] [--image ARCHIVE ...]``: run a real control plane until killed
(SIGTERM or Ctrl-C).

``--clusters manager,worker-a,worker-b`` runs one control plane per name instead, each
with the real JobSet and Kueue, the first a Kueue MultiKueue manager dispatching to the
others (``tests/ecosystem/multikueue.py``); the kubeconfig has a context per cluster,
the manager's current, and ``ready`` is printed with each cluster's URL. ``--namespace``
(repeatable; default ``default``) names the namespaces whose LocalQueue ``user-queue``
every cluster has.

Prints ``ready URL`` (flushed) once the API server is ready and the node is
registered Ready. The kubeconfig is cluster-admin; the audit log has one JSON line
per request the API server served.

``--node fake`` (the default) is the fake kubelet: pods stay as the scheduler left
them. ``--node real`` is the real node of ``node.py`` (kubelet, containerd, runc,
CNI, kube-proxy, CoreDNS, in a network namespace of its own): pods run, and
``kubectl run t --image=localhost/mxgitops/toolbox:1 -- sleep 600``, ``kubectl logs``
and ``kubectl exec`` work. ``--image`` imports more OCI archives into it.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import tempfile
import threading
from pathlib import Path

from .harness import RealCluster
from .launcher import ControlPlane
from .node import real_node_cluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.controlplane", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--audit-log", type=Path, default=None)
    parser.add_argument("--dir", type=Path, default=None, help="keep certificates and logs here")
    parser.add_argument("--node", choices=("fake", "real"), default="fake")
    parser.add_argument(
        "--image",
        type=Path,
        action="append",
        default=[],
        help="an OCI archive to import into the real node (repeatable)",
    )
    parser.add_argument("--clusters", default=None, help="manager,worker,...: MultiKueue")
    parser.add_argument("--namespace", action="append", default=None)
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.ExitStack() as stack:
        directory = args.dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if args.clusters:
            from tests.ecosystem.multikueue import MultiKueue

            clusters = stack.enter_context(
                MultiKueue(
                    directory,
                    args.clusters.split(","),
                    namespaces=args.namespace or ("default",),
                )
            )
            clusters.kubeconfig(args.kubeconfig)
            urls = " ".join(f"{m.name}={m.plane.url}" for m in clusters.members.values())
            print(f"ready {urls} in {clusters.started_in:.1f} s", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                stop.wait()
            return 0
        if args.node == "real":
            plane = stack.enter_context(real_node_cluster(directory, args.audit_log, args.image))
            plane.kubeconfig(args.kubeconfig)
        else:
            plane = stack.enter_context(ControlPlane(directory, audit_log=args.audit_log))
            stack.enter_context(RealCluster(plane, args.kubeconfig))
        print(f"ready {plane.url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
