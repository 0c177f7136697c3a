"""The node's small images, made here and cached by what they are made of.

* ``PAUSE_IMAGE``: the pod sandbox, Kubernetes' own ``pause.c`` from the pinned
  ``k8s.io/kubernetes`` module, compiled static.
* ``TOOLBOX_IMAGE``: Debian's static busybox with its applets (a shell, ``wget``,
  ``nslookup``, ``nc``): what a person ``kubectl run``s, and what the node tests'
  plain pods run.

Each archive lives in ``~/.cache/mxgitops/images/<name>-<key>.tar``: written to a
partial file under a lock, renamed when whole.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from tests.builds import gobuild

from . import build
from .ociimage import write_archive

CACHE_ENV = "MXGITOPS_IMAGE_CACHE"
PAUSE_IMAGE = "localhost/mxgitops/pause:3.10"
TOOLBOX_IMAGE = "localhost/mxgitops/toolbox:1"
BUSYBOX = Path("/bin/busybox")


def cache_root() -> Path:
    return gobuild.cache_root("images", CACHE_ENV)


def cached_archive(name: str, key: str, make: Callable[[Path, Path], None]) -> Path:
    """``<cache>/<name>-<key>.tar``, made by ``make(scratch_dir, partial_archive)`` if
    missing, and renamed into place only once ``make`` returned."""
    root = cache_root()
    archive = root / f"{name}-{key}.tar"
    if archive.is_file():
        return archive
    return gobuild.remembered(archive, lambda: _make_archive(name, archive, make))


def _make_archive(name: str, archive: Path, make: Callable[[Path, Path], None]) -> Path:
    root = archive.parent
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not archive.is_file():
            scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
            try:
                partial = scratch / "archive.tar"
                make(scratch, partial)
                partial.rename(archive)
                for older in root.glob(f"{name}-*.tar"):  # an image's older builds: gone
                    if older != archive:
                        older.unlink()
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    return archive


def _module_dir(module: str, version: str) -> Path:
    out = gobuild.run("pause-image", ["go", "mod", "download", "-json", f"{module}@{version}"])
    return Path(json.loads(out)["Dir"])


def pause_archive() -> Path:
    source = (
        _module_dir("k8s.io/kubernetes", build.KUBERNETES_VERSION) / "build/pause/linux/pause.c"
    )
    key = hashlib.sha256(source.read_bytes()).hexdigest()[:12]

    def make(scratch: Path, archive: Path) -> None:
        rootfs = scratch / "rootfs"
        rootfs.mkdir()
        gobuild.run(
            "pause-image",
            [
                "gcc",
                "-Os",
                "-static",
                "-DVERSION=mxgitops",
                "-o",
                str(rootfs / "pause"),
                str(source),
            ],
        )
        write_archive(rootfs, PAUSE_IMAGE, archive, entrypoint=["/pause"], user="65535:65535")

    return cached_archive("pause", key, make)


def _package_version(package: str) -> str:
    return gobuild.run("toolbox-image", ["dpkg-query", "-W", "-f=${Version}", package])


def toolbox_archive() -> Path:
    if not BUSYBOX.is_file():
        raise gobuild.BuildFailed(
            f"the node's toolbox image needs {BUSYBOX}: apt-get install busybox-static"
        )
    key = hashlib.sha256(BUSYBOX.read_bytes()).hexdigest()[:12]

    def make(scratch: Path, archive: Path) -> None:
        rootfs = scratch / "rootfs"
        for directory in ("bin", "etc", "tmp", "root"):
            (rootfs / directory).mkdir(parents=True)
        (rootfs / "tmp").chmod(0o1777)
        shutil.copy2(BUSYBOX, rootfs / "bin/busybox")
        applets = gobuild.run("toolbox-image", [BUSYBOX, "--list"]).split()
        for applet in applets:
            if applet != "busybox":
                (rootfs / "bin" / applet).symlink_to("busybox")
        (rootfs / "etc/passwd").write_text(
            "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
        )
        (rootfs / "etc/group").write_text("root:x:0:\nnobody:x:65534:\n")
        write_archive(rootfs, TOOLBOX_IMAGE, archive, cmd=["/bin/sh"])

    return cached_archive("toolbox", f"busybox{_package_version('busybox-static')}-{key}", make)
