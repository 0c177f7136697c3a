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

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

GOMOD_DIR = Path(__file__).with_name("gomod")
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
CACHE_ENV = "MXGITOPS_CONTROLPLANE_CACHE"


def pinned_version(module: str) -> str:
    """The version of ``module`` the wrapper's go.mod requires."""
    text = (GOMOD_DIR / "go.mod").read_text()
    found = re.search(rf"^(?:require)?\s+{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    if found is None:
        raise SystemExit(f"{GOMOD_DIR / 'go.mod'} does not require {module}")
    return found.group(1)


KUBERNETES_VERSION = pinned_version("k8s.io/kubernetes")
ETCD_VERSION = pinned_version("go.etcd.io/etcd/server/v3")


# Read once, when the test session imports this module: tests that move HOME (to keep
# ~/.kube/config or ~/.gitconfig out) must still find the binaries already built.
DEFAULT_CACHE = Path.home() / ".cache" / "mxgitops" / "controlplane"


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def build_key() -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "etcd/main.go"):
        digest.update((GOMOD_DIR / name).read_bytes())
    return f"{KUBERNETES_VERSION}-etcd{ETCD_VERSION}-{digest.hexdigest()[:12]}"


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
    subprocess.run([*command, "tool", "./etcd"], check=True, cwd=GOMOD_DIR, env=env)


def ensure_built() -> Path:
    """The directory holding all four binaries, compiling them first if missing."""
    root = cache_root()
    bindir = root / build_key()
    if all((bindir / name).is_file() for name in BINARIES):
        return bindir
    if shutil.which("go") is None:
        raise SystemExit("the control plane needs Go (`go` is not on PATH); see README.md")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second builder waits, then finds the result
        if all((bindir / name).is_file() for name in BINARIES):
            return bindir
        staging = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
        try:
            _compile(staging)
            missing = [name for name in BINARIES if not (staging / name).is_file()]
            if missing:
                raise SystemExit(f"go build produced no {', '.join(missing)} in {staging}")
            staging.rename(bindir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return bindir


if __name__ == "__main__":
    print(ensure_built())
    sys.exit(0)
