"""Images made from Debian's packages: root filesystems by ``mmdebstrap``, no registry.

* ``TRAINING_IMAGE``: Debian bookworm (minbase) with its ``python3``, and
  ``mxnet==1.9.1`` with ``numpy<1.24`` from PyPI, plus the scripts the node's MXNet
  tests run, in ``/opt/mxtrain/``: ``training/train.py`` (a small custom ``dist_sync``
  loop) and ``training/fit.py`` (a ``Module.fit`` that MXNet itself logs); see each
  script.

An image is cached by what it is made of: the suite, the packages asked for and
the versions apt would install of them today (``apt-cache policy`` of this
machine's lists, the same Debian release), the PyPI pins and the
scripts' text; a security update of one of the packages makes a new image.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from tests.builds import gobuild

from .images import cached_archive
from .ociimage import write_archive

SUITE = "bookworm"
TRAINING_IMAGE = "localhost/mxgitops/mxnet-train:1.9.1"
TRAINING_PACKAGES = ("python3", "ca-certificates", "libgomp1", "libquadmath0", "libgfortran5")
TRAINING_PIP = ("mxnet==1.9.1", "numpy<1.24")
TRAIN_SCRIPT = Path(__file__).with_name("training") / "train.py"
SCRIPTS = (TRAIN_SCRIPT, TRAIN_SCRIPT.with_name("fit.py"))
SITE = "usr/local/lib/python3.11/dist-packages"


def candidate_versions(packages: tuple[str, ...]) -> str:
    """``name=version`` of each package as apt would install it now."""
    out = gobuild.run("images", ["apt-cache", "policy", *packages])
    versions, current = [], ""
    for line in out.splitlines():
        if not line.startswith(" "):
            current = line.rstrip(":")
        elif line.strip().startswith("Candidate:"):
            versions.append(f"{current}={line.split(':', 1)[1].strip()}")
    if len(versions) != len(packages):
        raise gobuild.BuildFailed(
            f"apt-cache knows no candidate for some of {', '.join(packages)}: run apt-get update"
        )
    return ",".join(versions)


def debian_rootfs(target: Path, packages: tuple[str, ...]) -> None:
    """A minbase root filesystem of ``SUITE`` with ``packages``, at ``target``."""
    gobuild.run(
        "images",
        [
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            "--mode=root",
            f"--include={','.join(packages)}",
            "--aptopt=Acquire::Retries 3",
            '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
            SUITE,
            str(target),
        ],
    )


def training_archive() -> Path:
    recipe = "\n".join(
        [
            SUITE,
            candidate_versions(TRAINING_PACKAGES),
            *TRAINING_PIP,
            *(script.read_text() for script in SCRIPTS),
        ]
    )
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]

    def make(scratch: Path, archive: Path) -> None:
        rootfs = scratch / "rootfs"
        debian_rootfs(rootfs, TRAINING_PACKAGES)
        # The wheels are for CPython 3.11 on glibc: this interpreter is bookworm's too.
        gobuild.run(
            "images",
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-compile",
                "--disable-pip-version-check",
                f"--target={rootfs / SITE}",
                *TRAINING_PIP,
            ],
        )
        (rootfs / "opt/mxtrain").mkdir(parents=True)
        for script in SCRIPTS:
            (rootfs / "opt/mxtrain" / script.name).write_bytes(script.read_bytes())
        # The image is proven before it is cached: its own python imports mxnet.
        gobuild.run(
            "images",
            [
                "chroot",
                str(rootfs),
                "python3",
                "-c",
                "import mxnet, numpy; print(mxnet.__version__)",
            ],
        )
        write_archive(
            rootfs,
            TRAINING_IMAGE,
            archive,
            cmd=["python3", "/opt/mxtrain/train.py"],
            env={"PYTHONUNBUFFERED": "1"},
        )

    return cached_archive("mxnet-train", key, make)
