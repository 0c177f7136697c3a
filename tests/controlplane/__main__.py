"""``python -m tests.controlplane --kubeconfig PATH [--audit-log PATH] [--dir DIR]``:
run a real control plane until killed (SIGTERM or Ctrl-C).

Prints ``ready URL`` (flushed) once the API server is ready and the fake node is
registered. The kubeconfig is cluster-admin; the audit log has one JSON line per
request the API server served.
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.controlplane", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--audit-log", type=Path, default=None)
    parser.add_argument("--dir", type=Path, default=None, help="keep certificates and logs here")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.ExitStack() as stack:
        directory = args.dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        plane = stack.enter_context(ControlPlane(directory, audit_log=args.audit_log))
        stack.enter_context(RealCluster(plane, args.kubeconfig))
        print(f"ready {plane.url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
