"""Build the real node's binaries once per version: kubelet and kube-proxy, containerd
and its runc shim, runc (with seccomp), the CNI plugins and CoreDNS.

``python -m tests.controlplane.nodebuild`` builds what is missing and prints one
``name directory`` line per component.

Each component is compiled from the Go module proxy into a cache directory of its
own, ``~/.cache/mxgitops/node/<name>-<version>-<recipe digest>/``, so a version bump
of one rebuilds only that one; like ``build.py``, a build holds a file lock (a second
builder waits, then finds the result) and writes into a staging directory that is
renamed into place only when every binary is there. kubelet and kube-proxy come from
the same ``k8s.io/kubernetes`` release as the control plane, through the wrapper
module ``nodemod/`` (see ``pin.py``); the others have no ``replace`` directives and
are ``go install``ed at their pinned version directly.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.builds import gobuild

from . import build

NODEMOD_DIR = Path(__file__).with_name("nodemod")
CACHE_ENV = "MXGITOPS_NODE_CACHE"


@dataclass(frozen=True)
class Component:
    """One Go module's binaries, named after the last element of each package path."""

    name: str
    module: str
    version: str
    packages: tuple[str, ...]
    cgo: bool = False
    tags: tuple[str, ...] = ()
    ldflags: str = "-s -w"

    @property
    def binaries(self) -> tuple[str, ...]:
        return tuple(
            package.rstrip("/").rsplit("/", 1)[-1] or self.name for package in self.packages
        )

    def key(self) -> str:
        recipe = repr((self.module, self.packages, self.cgo, self.tags, self.ldflags))
        if self.name == "kubernetes":
            recipe += (NODEMOD_DIR / "go.mod").read_text() + (NODEMOD_DIR / "go.sum").read_text()
        return f"{self.name}-{self.version}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


CONTAINERD_VERSION = "v2.4.2"
CONTAINERD_VERSION_VAR = "github.com/containerd/containerd/v2/version.Version"
RUNC_VERSION = "v1.5.3"
COMPONENTS = (
    Component(
        "kubernetes",
        "k8s.io/kubernetes",
        build.KUBERNETES_VERSION,
        ("cmd/kubelet", "cmd/kube-proxy"),
        ldflags=build.ldflags(),
    ),
    Component(
        "containerd",
        "github.com/containerd/containerd/v2",
        CONTAINERD_VERSION,
        ("cmd/containerd", "cmd/containerd-shim-runc-v2", "cmd/ctr"),
        tags=("no_btrfs", "no_devmapper", "no_zfs", "urfave_cli_no_docs"),
        ldflags=f"-s -w -X {CONTAINERD_VERSION_VAR}={CONTAINERD_VERSION}",
    ),
    Component(
        "runc",
        "github.com/opencontainers/runc",
        RUNC_VERSION,
        ("",),  # the module's root package is runc itself
        cgo=True,  # libseccomp: RuntimeDefault profiles need runc built with seccomp
        tags=("seccomp", "urfave_cli_no_docs"),
        ldflags=f"-s -w -X main.version={RUNC_VERSION.removeprefix('v')}",
    ),
    Component(
        "cni",
        "github.com/containernetworking/plugins",
        "v1.10.0",
        (
            "plugins/main/bridge",
            "plugins/main/loopback",
            "plugins/ipam/host-local",
            "plugins/meta/portmap",
        ),
    ),
    Component("coredns", "github.com/coredns/coredns", "v1.15.0", ("",)),
)


def cache_root() -> Path:
    return gobuild.cache_root("node", CACHE_ENV)


def _compile(component: Component, target: Path) -> None:
    env = {
        **os.environ,
        "CGO_ENABLED": "1" if component.cgo else "0",
        "GOFLAGS": "-mod=readonly",
        "GOBIN": str(target),
    }
    flags = ["-trimpath", f"-ldflags={component.ldflags}"]
    if component.tags:
        flags.append(f"-tags={','.join(component.tags)}")
    if component.name == "kubernetes":
        command = ["go", "build", *flags, "-o", str(target), "tool"]
        gobuild.run(component.name, command, cwd=NODEMOD_DIR, env=env)
        return
    targets = [
        f"{component.module}{'/' + package if package else ''}@{component.version}"
        for package in component.packages
    ]
    gobuild.run(component.name, ["go", "install", *flags, *targets], cwd=target, env=env)
    if component.packages == ("",):  # go install names a root package after its module
        built = target / component.module.rsplit("/", 1)[-1]
        if built.name != component.name:
            built.rename(target / component.name)


def ensure_component(component: Component) -> Path:
    """The directory holding ``component``'s binaries, compiling them first if missing."""
    return gobuild.ensure_built(
        cache_root(),
        component.key(),
        component.binaries,
        lambda staging: _compile(component, staging),
    )


def ensure_node_built() -> dict[str, Path]:
    """Every node binary by name, mapped to the file that holds it."""
    found: dict[str, Path] = {}
    for component in COMPONENTS:
        bindir = ensure_component(component)
        found.update({name: bindir / name for name in component.binaries})
    return found


if __name__ == "__main__":
    for component in COMPONENTS:
        print(component.name, ensure_component(component), flush=True)
    sys.exit(0)
