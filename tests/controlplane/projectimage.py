"""The project's own image, built from its own ``Dockerfile`` by buildah, no registry.

The Dockerfile's base is ``python:3.11-slim-bookworm`` pinned by digest, which no
registry here serves. The base is a build argument (``PYTHON_IMAGE``) whose default
stays that digest; here it is set to ``PYTHON_BASE``, made of the same kind from
Debian's packages: bookworm (minbase) with its Python 3.11, ``venv`` and a ``pip``
of its own (``ensurepip``: as the official image has one, which the Dockerfile
uninstalls from the final stage). Everything else is the Dockerfile's own steps, run
by ``buildah bud`` with chroot isolation and the host's network (apt and PyPI).

buildah keeps its storage under the image cache, not in ``/var/lib/containers``, with
the kernel's overlay driver (vfs copies the whole tree at every step: a build took
minutes) and its layer cache: a change to mxgitops reruns the Dockerfile's steps from
``COPY mxgitops`` on, not apt's and the locked dependencies' (35 s against 160 s).
Both archives are cached: the base by its packages' versions, the project's image
by the digest of every file the Dockerfile copies in and of the base.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from tests.builds import gobuild

from .images import cache_root, cached_archive
from .ociimage import write_archive
from .rootfs import candidate_versions, debian_rootfs

REPO = Path(__file__).resolve().parents[2]
PYTHON_BASE = "localhost/mxgitops/python:3.11-slim-bookworm"
PROJECT_IMAGE = "localhost/mxgitops/mxgitops:test"
BASE_PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates")
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
BUILD_CA = "/run/mxgitops-build-ca.crt"
BASE_PIP = ("pip==24.3.1", "setuptools==75.6.0", "wheel==0.45.1")
BASE_FORMAT = ",history"  # the base's config has a history (ociimage.py): its cache key
# Intermediate images buildah keeps between builds (its layer cache) before it starts over.
KEPT_IMAGES = 40


def python_base_archive() -> Path:
    recipe = candidate_versions(BASE_PACKAGES) + ",".join(BASE_PIP) + BASE_FORMAT
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]

    def make(scratch: Path, archive: Path) -> None:
        rootfs = scratch / "rootfs"
        debian_rootfs(rootfs, BASE_PACKAGES)
        # A pip the image's own Python owns (and may uninstall), as in python:*-slim.
        for marker in (rootfs / "usr/lib").glob("python3.*/EXTERNALLY-MANAGED"):
            marker.unlink()
        # (Debian's own python3 has no ensurepip; its venv module has, for venvs.)
        site = rootfs / "usr/local/lib/python3.11/dist-packages"
        gobuild.run(
            "images",
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                f"--target={site}",
                *BASE_PIP,
            ],
        )
        write_archive(rootfs, PYTHON_BASE, archive, cmd=["python3"], env={"LANG": "C.UTF-8"})

    return cached_archive("python-base", key, make)


def _inputs_digest(base: Path) -> str:
    digest = hashlib.sha256(base.name.encode())
    files = [REPO / "Dockerfile", REPO / "pyproject.toml", REPO / "README.md"]
    files += sorted((REPO / "image").glob("*.lock")) + sorted((REPO / "mxgitops").rglob("*.py"))
    files += sorted((REPO / "mxgitops").rglob("*.json"))
    for path in files:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def _storage() -> Path:
    return cache_root() / "buildah-layers"


def _buildah(*args: str) -> str:
    storage = _storage()
    return gobuild.run(
        "images",
        [
            "buildah",
            f"--root={storage / 'root'}",
            f"--runroot={storage / 'run'}",
            "--storage-driver=overlay",
            *args,
        ],
    ).strip()


def project_archive() -> Path:
    """The project's image, rebuilt when a file the Dockerfile copies changed, on the
    layers buildah kept from the builds before (``--layers``)."""
    base = python_base_archive()

    def make(scratch: Path, archive: Path) -> None:
        # The RUN steps reach PyPI through this machine's network, whose TLS may be
        # signed by a CA only the host trusts: pip in the build is pointed at the
        # host's bundle, mounted for the build's steps only (not in the image). The
        # file's path is the same at every build, as a cached step's mounts are.
        pip_conf = _storage() / "pip.conf"
        pip_conf.parent.mkdir(parents=True, exist_ok=True)
        pip_conf.write_text(f"[global]\ncert = {BUILD_CA}\n")
        mounts = [f"--volume={pip_conf}:/etc/pip.conf:ro"]
        if HOST_CA.is_file():
            mounts.append(f"--volume={HOST_CA}:{BUILD_CA}:ro")
        if len(_buildah("images", "--all", "--quiet").split()) > KEPT_IMAGES:
            _buildah("rmi", "--all", "--force")  # the cache bounded: start it over
        _buildah("tag", _buildah("pull", "--quiet", f"oci-archive:{base}"), PYTHON_BASE)
        _buildah(
            "bud",
            "--quiet",
            "--isolation=chroot",
            "--network=host",
            "--layers=true",
            *mounts,
            f"--build-arg=PYTHON_IMAGE={PYTHON_BASE}",
            f"--tag={PROJECT_IMAGE}",
            f"--file={REPO / 'Dockerfile'}",
            str(REPO),
        )
        _buildah(
            "push",
            "--quiet",
            "--disable-compression",
            PROJECT_IMAGE,
            f"oci-archive:{archive}:{PROJECT_IMAGE}",
        )
        _buildah("rmi", PROJECT_IMAGE)  # the archive is what is kept; the layers stay

    return cached_archive("mxgitops", _inputs_digest(base), make)
