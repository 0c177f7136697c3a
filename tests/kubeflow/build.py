"""Build Kubeflow's training operator v1.8.1 (the last with an MXJob controller), once.

``python -m tests.kubeflow.build`` prints the directory that holds the binary
``training-operator`` and the MXJob CRD it serves (``kubeflow.org_mxjobs.yaml``).

Compiled from the Go module proxy through the wrapper module in ``gomod/`` (the
operator's own go.mod needs no replace directive, so a ``tool`` line does) into a
cache outside the clone, keyed by the pinned version and a digest of the wrapper,
exactly as ``tests/controlplane/build.py`` caches the control plane: a file lock (a
second builder waits, then finds the result), a staging directory renamed into place.
The CRD comes from the same module's source, so it is the operator's own.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

GOMOD_DIR = Path(__file__).with_name("gomod")
MODULE = "github.com/kubeflow/training-operator"
TOOL = f"{MODULE}/cmd/training-operator.v1"
BINARY = "training-operator"
CRD = "kubeflow.org_mxjobs.yaml"
CACHE_ENV = "MXGITOPS_KUBEFLOW_CACHE"


def pinned_version() -> str:
    text = (GOMOD_DIR / "go.mod").read_text()
    found = re.search(rf"^\s+{re.escape(MODULE)}\s+(v\S+)", text, re.MULTILINE)
    if found is None:
        raise SystemExit(f"{GOMOD_DIR / 'go.mod'} does not require {MODULE}")
    return found.group(1)


VERSION = pinned_version()


# Read once, when the test session imports this module (as tests/controlplane/build.py):
# a test that moves HOME must still find the binary already built.
DEFAULT_CACHE = Path.home() / ".cache" / "mxgitops" / "kubeflow"


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def build_key() -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((GOMOD_DIR / name).read_bytes())
    return f"{VERSION}-{digest.hexdigest()[:12]}"


def _go(*args: str, target: Path | None = None) -> str:
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
    out = subprocess.run(
        ["go", *args], check=True, cwd=GOMOD_DIR, env=env, capture_output=True, text=True
    )
    return out.stdout


def _compile(staging: Path) -> None:
    _go("build", "-trimpath", "-ldflags=-s -w", "-o", str(staging / BINARY), TOOL)
    source = json.loads(_go("mod", "download", "-json", f"{MODULE}@{VERSION}"))["Dir"]
    shutil.copyfile(Path(source) / "manifests" / "base" / "crds" / CRD, staging / CRD)


def ensure_built() -> Path:
    """The directory holding the operator and its MXJob CRD, built first if missing."""
    root = cache_root()
    bindir = root / build_key()
    if (bindir / BINARY).is_file() and (bindir / CRD).is_file():
        return bindir
    if shutil.which("go") is None:
        raise SystemExit("the training operator needs Go (`go` is not on PATH); see README.md")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second builder waits, then finds the result
        if (bindir / BINARY).is_file() and (bindir / CRD).is_file():
            return bindir
        staging = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
        try:
            _compile(staging)
            staging.rename(bindir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return bindir


if __name__ == "__main__":
    print(ensure_built())
    sys.exit(0)
