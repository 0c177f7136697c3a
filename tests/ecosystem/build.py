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

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.builds import gobuild

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
        return gobuild.pinned_version(self.gomod, self.module)

    def key(self) -> str:
        return gobuild.build_key(self.version, self.gomod / "go.mod", self.gomod / "go.sum")

    def cache_root(self) -> Path:
        return gobuild.cache_root(self.name, f"MXGITOPS_{self.name.upper()}_CACHE")


JOBSET = Component("jobset", "sigs.k8s.io/jobset", "sigs.k8s.io/jobset", "jobset-manager")
KUEUE = Component("kueue", "sigs.k8s.io/kueue", "sigs.k8s.io/kueue/cmd/kueue", "kueue-manager")
COMPONENTS = {c.name: c for c in (JOBSET, KUEUE)}


def module_dir(component: Component) -> Path:
    """The upstream module's source in Go's module cache (its config/ holds the CRDs)."""
    out = gobuild.run(
        component.name,
        ["go", "mod", "download", "-json", f"{component.module}@{component.version}"],
        cwd=component.gomod,
    )
    return Path(json.loads(out)["Dir"])


def ensure_built(component: Component) -> Path:
    """The directory holding the component's binary, compiling it first if missing."""

    def compile_into(staging: Path) -> None:
        env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
        command = ["go", "build", "-trimpath", "-ldflags=-s -w"]
        target = staging / component.binary
        command += ["-o", str(target), component.package]
        gobuild.run(component.name, command, cwd=component.gomod, env=env)

    root = component.cache_root()
    return gobuild.ensure_built(root, component.key(), (component.binary,), compile_into)


if __name__ == "__main__":
    for name in sys.argv[1:] or list(COMPONENTS):
        print(ensure_built(COMPONENTS[name]))
    sys.exit(0)
