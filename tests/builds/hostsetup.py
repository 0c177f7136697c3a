"""What the real parts need from the operating system, set up before any build starts.

The tests build the real parts themselves (Go from the module proxy), but a few
things come from the machine: a C compiler and libseccomp for runc and Gitea,
kube-proxy's iptables and conntrack, mmdebstrap and buildah for the images, Chromium and
its driver for the dashboard's browser tests. A fresh
machine lacks them, and a build that meets the lack fails minutes in. So once, when
the session starts and before the control plane's build, each need is checked:

* all present: nothing is said;
* some missing, running as root where ``apt-get`` exists: one line says which
  Debian packages are installed and why, and they are (log in
  ``~/.cache/mxgitops/logs/host-setup.log``);
* otherwise the session stops at once, with one message naming what is missing and
  the command that installs it.

``--backend double`` (the API double only) needs none of them and checks nothing.

Registered first by ``tests/conftest.py``, so that it runs before any build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.builds import gobuild

# Root's tools (iptables, conntrack) live in sbin, which a user's PATH may lack.
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"])
APT_LISTS = Path("/var/lib/apt/lists")
LOG = gobuild.LOG_DIR / "host-setup.log"


def _command(name: str) -> Callable[[], bool]:
    return lambda: shutil.which(name, path=SEARCH_PATH) is not None


def _file(path: str) -> Callable[[], bool]:
    return lambda: Path(path).is_file()


def _library(name: str) -> Callable[[], bool]:
    def found() -> bool:
        if shutil.which("pkg-config") is None:
            return False
        return subprocess.run(["pkg-config", "--exists", name], check=False).returncode == 0

    return found


def _static_libc() -> bool:
    if shutil.which("gcc") is None:
        return False
    found = subprocess.run(
        ["gcc", "-print-file-name=libc.a"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return os.path.isabs(found) and Path(found).is_file()


def _apt_lists() -> bool:
    # mmdebstrap's images and their cache keys read apt's lists (`apt-cache policy`).
    return any(APT_LISTS.glob("*_Packages*"))


@dataclass(frozen=True)
class Need:
    what: str
    package: str | None  # the Debian package that brings it; None: not from apt
    why: str
    present: Callable[[], bool]


NEEDS = (
    Need("go", None, "every real part is built from the Go module proxy", _command("go")),
    Need("apt's package lists", "", "the images' Debian packages", _apt_lists),
    Need("pkg-config", "pkg-config", "runc's build (libseccomp's flags)", _command("pkg-config")),
    Need("libseccomp", "libseccomp-dev", "runc's seccomp filters", _library("libseccomp")),
    Need("gcc", "gcc", "Gitea's SQLite driver (cgo), runc, the pause image", _command("gcc")),
    Need("libc.a", "libc6-dev", "the static pause image, cgo", _static_libc),
    Need("iptables", "iptables", "kube-proxy's rules, CNI's portmap", _command("iptables")),
    Need("conntrack", "conntrack", "kube-proxy", _command("conntrack")),
    Need("mmdebstrap", "mmdebstrap", "the images' root filesystems", _command("mmdebstrap")),
    Need("buildah", "buildah", "the project's image, from its Dockerfile", _command("buildah")),
    Need("/bin/busybox", "busybox-static", "the node's toolbox image", _file("/bin/busybox")),
    Need("ip", "iproute2", "the node's network namespace", _command("ip")),
    Need("nsenter", "util-linux", "the node's network namespace", _command("nsenter")),
    Need("unshare", "util-linux", "Kueue's private /etc", _command("unshare")),
    Need("chromium", "chromium", "the dashboard's pages in a real browser", _command("chromium")),
    Need(
        "chromedriver",
        "chromium-driver",
        "Selenium's driver of that browser",
        _command("chromedriver"),
    ),
)


def missing(needs: tuple[Need, ...] = NEEDS) -> list[Need]:
    return [need for need in needs if not need.present()]


def _packages(needs: list[Need]) -> list[str]:
    return sorted({need.package for need in needs if need.package})


def can_install() -> bool:
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


def install(needs: list[Need]) -> None:
    """``apt-get update`` and ``apt-get install`` of what `needs` come from."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    gobuild.run("host-setup", ["apt-get", "update", "-q"], env=env)
    packages = _packages(needs)
    if packages:
        gobuild.run("host-setup", ["apt-get", "install", "-y", "-q", *packages], env=env)


def advice(needs: list[Need]) -> str:
    """One message: what is missing, for what, and the command that installs it."""
    named = "; ".join(f"{need.what} ({need.why})" for need in needs)
    steps = []
    if any(need.package is not None for need in needs):
        steps.append(f"sudo apt-get update && sudo apt-get install -y {' '.join(_packages(needs))}")
    if any(need.package is None for need in needs):
        steps.append("install Go (go.dev/doc/install) and put `go` on PATH")
    return (
        f"the real parts' tests need what this machine lacks: {named}. "
        f"Install: {' ; '.join(steps)}. (`pytest --backend double` runs the API double "
        "only and needs none of it.)"
    )


def set_up() -> None:
    """Every need present, installed now if it can be; else the session stops."""
    lacking = missing()
    if not lacking:
        return
    installable = all(need.package is not None for need in lacking)
    if installable and can_install():
        print(
            f"mxgitops tests: installing {', '.join(_packages(lacking)) or 'apt lists'} with "
            f"apt-get, once, for: {'; '.join(need.why for need in lacking)} (log: {LOG})",
            flush=True,
        )
        try:
            install(lacking)
        except gobuild.BuildFailed as failure:
            pytest.exit(f"setting up the machine failed: {failure.msg}", returncode=4)
        lacking = missing()
        if not lacking:
            return
    pytest.exit(advice(lacking), returncode=4)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # xdist's workers start after the controller's check
        return
    if config.getoption("--backend", default="both") == "double":
        return
    set_up()
