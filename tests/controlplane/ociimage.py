"""Write a root filesystem as an OCI image archive that ``ctr images import`` takes.

No registry is reachable here, so the node's images are made on this machine and
imported into containerd: one uncompressed layer (the whole tree), an image config
(entrypoint, environment, user) and an OCI index naming the image by its full
reference (``io.containerd.image.name``), so pods use it by that tag with
``imagePullPolicy: Never`` or ``IfNotPresent``.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

LAYER = "application/vnd.oci.image.layer.v1.tar"
CONFIG = "application/vnd.oci.image.config.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
EPOCH = "1970-01-01T00:00:00Z"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _reset_owner(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _write_layer(rootfs: Path, target: Path) -> tuple[str, int]:
    """The tree as one tar (owners as on disk: a rootfs made as root has the owners
    its packages set); its digest and size."""
    with tarfile.open(target, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(rootfs.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(rootfs)), recursive=False)
    digest = hashlib.sha256()
    with open(target, "rb") as layer:
        while chunk := layer.read(1 << 20):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest(), target.stat().st_size


def _descriptor(media_type: str, blob: bytes, **extra: Any) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    return {"mediaType": media_type, "digest": digest, "size": len(blob), **extra}


def write_archive(
    rootfs: Path,
    reference: str,
    out: Path,
    *,
    entrypoint: list[str] | None = None,
    cmd: list[str] | None = None,
    env: dict[str, str] | None = None,
    user: str = "",
    workdir: str = "/",
) -> Path:
    """Write ``rootfs`` as the image ``reference`` (``host/name:tag``) to ``out``."""
    layer_file = out.with_name(out.name + ".layer")
    layer_digest, layer_size = _write_layer(rootfs, layer_file)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": [f"{k}={v}" for k, v in {"PATH": PATH, **(env or {})}.items()],
            "Entrypoint": entrypoint,
            "Cmd": cmd,
            "User": user,
            "WorkingDir": workdir,
        },
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        # One entry for the one layer: buildah's layer cache (a build FROM this image
        # with --layers) matches its cached steps against the base's history.
        "history": [{"created": EPOCH, "created_by": f"mxgitops tests: {reference}"}],
    }
    config_blob = json.dumps(config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": _descriptor(CONFIG, config_blob),
        "layers": [{"mediaType": LAYER, "digest": layer_digest, "size": layer_size}],
    }
    manifest_blob = json.dumps(manifest, sort_keys=True).encode()
    tag = reference.rsplit(":", 1)[-1]
    index = {
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [
            _descriptor(
                MANIFEST,
                manifest_blob,
                platform={"architecture": "amd64", "os": "linux"},
                annotations={
                    "io.containerd.image.name": reference,
                    "org.opencontainers.image.ref.name": tag,
                },
            )
        ],
    }
    files = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(index, sort_keys=True).encode(),
    }
    for blob in (config_blob, manifest_blob):
        files["blobs/sha256/" + hashlib.sha256(blob).hexdigest()] = blob
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, mode="w") as tar:
        for name, data in files.items():
            info = _reset_owner(tarfile.TarInfo(name))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        layer_info = _reset_owner(tar.gettarinfo(layer_file, "blobs/sha256/" + layer_digest[7:]))
        with open(layer_file, "rb") as layer:
            tar.addfile(layer_info, layer)
    layer_file.unlink()
    partial.rename(out)
    return out
