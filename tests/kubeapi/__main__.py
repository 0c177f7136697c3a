"""``python -m tests.kubeapi --port PORT --kubeconfig PATH [--request-log PATH]
[--faults SPEC] [--seed N]``: run the double until killed.

Prints ``ready URL`` (flushed) once it accepts connections.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import signal
import sys
import threading
from pathlib import Path

from .harness import KubeAPI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.kubeapi", description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument(
        "--request-log",
        type=Path,
        default=None,
        help="append one JSON object per request to this file",
    )
    parser.add_argument("--faults", default="", help="fault spec, see tests/kubeapi/faults.py")
    parser.add_argument("--seed", type=int, default=0, help="seed for faults, uids and names")
    args = parser.parse_args(argv)
    # This process only serves: its heap is mostly stored objects, which live until
    # deleted. With the default thresholds (700, 10, 10) the collector went over the
    # growing store again and again: a tenth of the double's CPU in a first sync of
    # 1,000 jobs, about 2% with young collections less often and older ones rarely.
    gc.set_threshold(10_000, 50, 100)
    api = KubeAPI(
        args.kubeconfig,
        args.port,
        seed=args.seed,
        request_log=args.request_log,
        faults=args.faults,
        fault_seed=args.seed,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"ready {api.url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    api.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
