"""Build the JobSet controller and the Kueue controller manager, once per version.

``python -m tests.ecosystem.build [jobset|kueue]`` prints the directory holding each
binary (and, beside it, the module's ``config/`` directory with its CRDs).

Each is compiled from the Go module proxy through its wrapper module in ``gomod/<name>``
(a ``tool`` directive on the upstream main package, so the proxy's own ``go.sum`` pins the
graph) into ``~/.cache/mxgitops/<name>/<version>-<digest>/``, like the control plane
(tests/controlplane/build.py): a file lock, so a second builder waits and finds the
result, and a staging directory renamed into place, so a half-built cache never counts.
The upstream go.mods have no replace directives; the wrapper only pins what they require.
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
from dataclasses import dataclass
from pathlib import Path

GOMOD_ROOT = Path(__file__).with_name("gomod")


@dataclass(frozen=True)
class Component:
    """One controller: its Go module, its main package and the binary it becomes."""

    name: str  # also the cache directory's and the wrapper module's
    module: str
    package: str
    binary: str

    @property
    def gomod(self) -> Path:
        return GOMOD_ROOT / self.name

    @property
    def version(self) -> str:
        text = (self.gomod / "go.mod").read_text()
        found = re.search(rf"^(?:require)?\s+{re.escape(self.module)}\s+(v\S+)", text, re.M)
        if found is None:
            raise SystemExit(f"{self.gomod / 'go.mod'} does not require {self.module}")
        return found.group(1)

    def key(self) -> str:
        digest = hashlib.sha256()
        for name in ("go.mod", "go.sum"):
            digest.update((self.gomod / name).read_bytes())
        return f"{self.version}-{digest.hexdigest()[:12]}"

    def cache_root(self) -> Path:
        return Path.home() / ".cache" / "mxgitops" / self.name


JOBSET = Component("jobset", "sigs.k8s.io/jobset", "sigs.k8s.io/jobset", "jobset-manager")
KUEUE = Component("kueue", "sigs.k8s.io/kueue", "sigs.k8s.io/kueue/cmd/kueue", "kueue-manager")
COMPONENTS = {c.name: c for c in (JOBSET, KUEUE)}


def module_dir(component: Component) -> Path:
    """The upstream module's source in Go's module cache (its config/ holds the CRDs)."""
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{component.module}@{component.version}"],
        check=True,
        capture_output=True,
        text=True,
        cwd=component.gomod,
    ).stdout
    return Path(json.loads(out)["Dir"])


def ensure_built(component: Component) -> Path:
    """The directory holding the component's binary, compiling it first if missing."""
    root = component.cache_root()
    bindir = root / component.key()
    if (bindir / component.binary).is_file():
        return bindir
    if shutil.which("go") is None:
        raise SystemExit(f"{component.name} needs Go (`go` is not on PATH); see README.md")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second builder waits, then finds the result
        if (bindir / component.binary).is_file():
            return bindir
        staging = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
        try:
            env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
            command = ["go", "build", "-trimpath", "-ldflags=-s -w"]
            target = staging / component.binary
            subprocess.run(
                [*command, "-o", str(target), component.package],
                check=True,
                cwd=component.gomod,
                env=env,
            )
            staging.rename(bindir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return bindir


if __name__ == "__main__":
    for name in sys.argv[1:] or list(COMPONENTS):
        print(ensure_built(COMPONENTS[name]))
    sys.exit(0)
