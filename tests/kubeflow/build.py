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

import json
import os
import shutil
import sys
from pathlib import Path

from tests.builds import gobuild

GOMOD_DIR = Path(__file__).with_name("gomod")
MODULE = "github.com/kubeflow/training-operator"
TOOL = f"{MODULE}/cmd/training-operator.v1"
BINARY = "training-operator"
CRD = "kubeflow.org_mxjobs.yaml"
CACHE_ENV = "MXGITOPS_KUBEFLOW_CACHE"


VERSION = gobuild.pinned_version(GOMOD_DIR, MODULE)


def cache_root() -> Path:
    return gobuild.cache_root("kubeflow", CACHE_ENV)


def build_key() -> str:
    return gobuild.build_key(VERSION, GOMOD_DIR / "go.mod", GOMOD_DIR / "go.sum")


def _go(*args: str, target: Path | None = None) -> str:
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
    return gobuild.run("kubeflow", ["go", *args], cwd=GOMOD_DIR, env=env)


def _compile(staging: Path) -> None:
    _go("build", "-trimpath", "-ldflags=-s -w", "-o", str(staging / BINARY), TOOL)
    source = json.loads(_go("mod", "download", "-json", f"{MODULE}@{VERSION}"))["Dir"]
    shutil.copyfile(Path(source) / "manifests" / "base" / "crds" / CRD, staging / CRD)


def ensure_built() -> Path:
    """The directory holding the operator and its MXJob CRD, built first if missing."""
    return gobuild.ensure_built(cache_root(), build_key(), (BINARY, CRD), _compile)


if __name__ == "__main__":
    print(ensure_built())
    sys.exit(0)
