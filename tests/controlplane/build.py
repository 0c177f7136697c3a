"""Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl, once
per version.

``python -m tests.controlplane.build`` prints the directory that holds the binaries.

The binaries are compiled from the Go module proxy through the wrapper module in
``gomod/`` (see ``pin.py``) into a cache outside the clone, keyed by the pinned
Kubernetes and etcd versions and a digest of the wrapper module, so a warm run
reuses them and a version bump builds anew. A cold build on a 2-core machine takes
about as long as README.md says; Go's own module and build caches make a rebuild
after a small change of the wrapper fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.builds import gobuild

GOMOD_DIR = Path(__file__).with_name("gomod")
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
CACHE_ENV = "MXGITOPS_CONTROLPLANE_CACHE"


def pinned_version(module: str) -> str:
    """The version of ``module`` the wrapper's go.mod requires."""
    return gobuild.pinned_version(GOMOD_DIR, module)


KUBERNETES_VERSION = pinned_version("k8s.io/kubernetes")
ETCD_VERSION = pinned_version("go.etcd.io/etcd/server/v3")


def cache_root() -> Path:
    return gobuild.cache_root("controlplane", CACHE_ENV)


def build_key() -> str:
    files = (GOMOD_DIR / name for name in ("go.mod", "go.sum", "etcd/main.go"))
    return gobuild.build_key(f"{KUBERNETES_VERSION}-etcd{ETCD_VERSION}", *files)


def ldflags() -> str:
    major, minor, _ = KUBERNETES_VERSION.removeprefix("v").split(".")
    # What kube's own build stamps in: /version and kubectl see the real release.
    stamp = {
        "gitVersion": KUBERNETES_VERSION,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    flags = " ".join(f"-X k8s.io/component-base/version.{k}={v}" for k, v in stamp.items())
    return f"-s -w {flags}"


def _compile(target: Path) -> None:
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
    command = ["go", "build", "-trimpath", f"-ldflags={ldflags()}", "-o", str(target)]
    gobuild.run("controlplane", [*command, "tool", "./etcd"], cwd=GOMOD_DIR, env=env)


def ensure_built() -> Path:
    """The directory holding all five binaries, compiling them first if missing."""
    return gobuild.ensure_built(cache_root(), build_key(), BINARIES, _compile)


if __name__ == "__main__":
    print(ensure_built())
    sys.exit(0)
