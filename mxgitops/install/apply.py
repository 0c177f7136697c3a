"""`mxgitops install`'s apply: what differs from the cluster, applied server-side.

Each object is read first and applied only if some field install sets differs from the
live object's (or it is missing), or if a field install's last apply set (its managed
fields) is no longer rendered: applied whole under install's field manager, the server
then removes it. A second install with the same flags sends no write at all, and says
so. What install made before and no longer renders (the ConfigMap of earlier settings,
the receiver once --receiver is dropped) is deleted; Secrets are install's to create and
update from the files named, never deleted but by uninstall, and never printed: a diff
names a Secret, never its data. With `dry_run` the server computes each change
(`dryRun=All`) and the diff is shown; nothing is written.
"""

from __future__ import annotations

import base64
import difflib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from mxgitops.errors import ConfigError
from mxgitops.install.overlay import FIELD_MANAGER, INSTALL_LABEL, Installation
from mxgitops.install.render import render
from mxgitops.kube.cluster import Cluster
from mxgitops.kube.installs import KINDS
from mxgitops.objects import KubeObject

# What the server adds to every object, left out of a diff.
_SERVER_FIELDS = ("managedFields", "resourceVersion", "uid", "generation", "creationTimestamp")
# Kinds install prunes (its Secrets and its namespace stay until uninstall).
PRUNED_KINDS = tuple(k for k in KINDS if k not in ("Secret", "Namespace", "Job", "Pod"))
MAX_SECRET_FILE = 64 << 10  # bytes: a token, a key, known_hosts
# Keys read as one string (an environment variable, the webhook's secret): a file's
# trailing newline would become part of the token and fail every fetch.
ONE_LINE_KEYS = frozenset({"token", "secret"})


@dataclass
class Changes:
    """What install did (or, with a dry run, would do), one line each."""

    applied: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.applied or self.deleted)


def secrets(installation: Installation) -> list[KubeObject]:
    """The Secrets made from the files the flags name, each key's bytes as read."""
    made: dict[str, KubeObject] = {}
    for secret_file in installation.secret_files():
        try:
            content = secret_file.file.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read {secret_file.file}: {exc.strerror}") from exc
        if len(content) > MAX_SECRET_FILE:
            raise ConfigError(f"{secret_file.file} is over {MAX_SECRET_FILE} bytes")
        secret = made.setdefault(
            secret_file.secret,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "Opaque",
                "metadata": {
                    "name": secret_file.secret,
                    "namespace": installation.namespace,
                    "labels": {INSTALL_LABEL: installation.namespace},
                },
                "data": {},
            },
        )
        if secret_file.key in ONE_LINE_KEYS:
            content = content.strip()  # an editor's final newline is no part of a token
        secret["data"][secret_file.key] = base64.b64encode(content).decode()
    return list(made.values())


def install_objects(installation: Installation) -> list[KubeObject]:
    """Every object install applies: the rendering, then the Secrets (after the
    namespace they go into)."""
    objects = render(installation)
    return [objects[0], *secrets(installation), *objects[1:]]


def apply(
    cluster: Cluster,
    installation: Installation,
    *,
    dry_run: bool = False,
    echo: Callable[[str], None],
) -> Changes:
    """Apply what differs, delete what install made and no longer renders."""
    changes = Changes()
    wanted = install_objects(installation)
    unmade_namespace = False  # a dry run's: the server cannot judge objects in it
    for obj in wanted:
        live = cluster.read_object(obj)
        if live is not None and contains(live, obj) and not dropped(live, obj):
            continue
        verb = "created" if live is None else "configured"
        if unmade_namespace and obj["metadata"].get("namespace"):
            answer = obj
        else:
            answer = cluster.apply_object(obj, manager=FIELD_MANAGER, dry_run=dry_run)
        if dry_run and obj["kind"] == "Namespace" and live is None:
            unmade_namespace = True
            echo(
                f"(namespace {installation.namespace} does not exist yet: what goes in it "
                "is shown as rendered, not as the server would make it)"
            )
        line = f"{name_of(obj)} {verb}{' (dry run)' if dry_run else ''}"
        changes.applied.append(line)
        echo(line)
        if dry_run and obj["kind"] != "Secret":
            for diff_line in diff(live, answer):
                echo(diff_line)
    kept = {(o["kind"], o["metadata"]["name"]) for o in wanted}
    for obj in made_before(cluster, installation.namespace):
        if (obj["kind"], obj["metadata"]["name"]) in kept:
            continue
        if not dry_run:
            cluster.delete_object(obj)
        line = f"{name_of(obj)} deleted{' (dry run)' if dry_run else ''}"
        changes.deleted.append(line)
        echo(line)
    return changes


def made_before(
    cluster: Cluster, namespace: str, kinds: tuple[str, ...] = PRUNED_KINDS
) -> list[KubeObject]:
    """The objects of `kinds` carrying install's label for `namespace`."""
    selector = f"{INSTALL_LABEL}={namespace}"
    found = []
    for kind in kinds:
        namespaced = KINDS[kind][2]
        for obj in cluster.labelled(kind, selector, namespace if namespaced else None):
            found.append({**obj, "kind": kind})
    return found


def contains(live: Any, wanted: Any) -> bool:
    """Whether every field of `wanted` has its value in `live` (the server adds
    defaults, which install leaves alone)."""
    if isinstance(wanted, Mapping):
        return isinstance(live, Mapping) and all(
            key in live and contains(live[key], value) for key, value in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(live, list)
            and len(live) == len(wanted)
            and all(contains(a, b) for a, b in zip(live, wanted, strict=True))
        )
    return bool(live == wanted)


def dropped(live: KubeObject, wanted: KubeObject) -> bool:
    """Whether a field install's last apply owned (the live object's managedFields of
    FIELD_MANAGER) is missing from `wanted`: `contains` cannot see a field dropped."""
    for entry in live.get("metadata", {}).get("managedFields") or []:
        if entry.get("manager") == FIELD_MANAGER and entry.get("operation") == "Apply":
            return _missing(entry.get("fieldsV1") or {}, wanted)
    return False


def _missing(owned: Mapping[str, Any], wanted: Any) -> bool:
    """Whether some path of the field set `owned` (fieldsV1: `f:` a key, `k:` a list item
    by its keys, `v:` a list's value, `i:` an index; `.` the item itself) is not in
    `wanted`. A list item's key the server defaulted (a port's protocol) matches one
    `wanted` leaves out."""
    for key, below in owned.items():
        form, _, raw = key.partition(":")
        found: Any
        if form == "f":
            if not isinstance(wanted, Mapping) or raw not in wanted:
                return True
            found = wanted[raw]
        elif form == "k":
            keys = json.loads(raw)
            items = wanted if isinstance(wanted, list) else []
            found = next((item for item in items if _keyed(item, keys)), None)
            if found is None:
                return True
        elif form == "v":
            if not isinstance(wanted, list) or json.loads(raw) not in wanted:
                return True
            continue
        elif form == "i":
            if not isinstance(wanted, list) or int(raw) >= len(wanted):
                return True
            found = wanted[int(raw)]
        else:  # "." (the item itself) and forms the server does not write
            continue
        if below and _missing(below, found):
            return True
    return False


def _keyed(item: Any, keys: Mapping[str, Any]) -> bool:
    return isinstance(item, Mapping) and all(item.get(k, v) == v for k, v in keys.items())


def diff(live: KubeObject | None, answer: KubeObject) -> list[str]:
    """The server-side diff: the live object against the server's dry-run answer."""
    before = _shown(live) if live is not None else []
    return list(
        difflib.unified_diff(before, _shown(answer), "live", "after apply", lineterm="", n=2)
    )


def _shown(obj: KubeObject) -> list[str]:
    metadata = {k: v for k, v in obj.get("metadata", {}).items() if k not in _SERVER_FIELDS}
    shown = {**obj, "metadata": metadata}
    shown.pop("status", None)
    return yaml.safe_dump(shown, sort_keys=True).splitlines()


def name_of(obj: KubeObject) -> str:
    metadata = obj["metadata"]
    where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
    return f"{obj['kind']} {where}{metadata['name']}"
