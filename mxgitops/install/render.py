"""The installation's objects, rendered in Python as `kubectl kustomize` (kustomize 5)
renders install's overlay (`Installation.kustomization`): no kustomize binary needed.

Only what the packaged base and components use is done, each step as kustomize does
it: the base's resources, its ConfigMap generated from config.env, its namespace and
labels; the overlay's Namespace, the components (the receiver's resources and its name
references to the CronJob; the JobSet component's JSON patch of the ClusterRole), the
ConfigMap merged with the flags' literals, the schedule, the ClusterRole and its
binding renamed for the install namespace (the binding's roleRef too), install's label,
the image, the namespace (the role bindings' ServiceAccounts too), then the ConfigMap's name
suffixed with kustomize's content hash, and each reference to it renamed. Objects come
out in kustomize's legacy order. tests/install/test_render.py checks the output equals
`kubectl kustomize` of the same overlay; a base using anything else fails it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from mxgitops.install.overlay import (
    BASE,
    CLUSTER_RBAC,
    COMPONENTS,
    CONFIG_MAP,
    CRONJOB,
    INSTALL_LABEL,
    Installation,
    image_parts,
)
from mxgitops.objects import KubeObject

# kustomize's legacy order (api/resid/gvk.go: orderFirst, then the rest, then orderLast).
_FIRST = (
    "Namespace", "ResourceQuota", "StorageClass", "CustomResourceDefinition", "ServiceAccount",
    "PodSecurityPolicy", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
    "ConfigMap", "Secret", "Endpoints", "Service", "LimitRange", "PriorityClass",
    "PersistentVolume", "PersistentVolumeClaim", "Deployment", "StatefulSet", "CronJob",
    "PodDisruptionBudget",
)  # fmt: skip
_LAST = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
CLUSTER_SCOPED = frozenset({"Namespace", "ClusterRole", "ClusterRoleBinding"})
_BINDINGS = ("RoleBinding", "ClusterRoleBinding")


def render(installation: Installation) -> list[KubeObject]:
    """Every object of the installation, Secrets aside (install makes those from files)."""
    objects = [installation.namespace_object(), *_base()]
    for component in installation.components():
        _add_component(objects, component)
    for kind in CLUSTER_RBAC:
        _only(objects, kind, CRONJOB)["metadata"]["name"] = installation.cluster_role()
    _only(objects, "ClusterRoleBinding", installation.cluster_role())["roleRef"]["name"] = (
        installation.cluster_role()
    )
    config = _only(objects, "ConfigMap", CONFIG_MAP)
    config["data"].update(installation.settings())
    cronjob = _only(objects, "CronJob", CRONJOB)
    if installation.schedule:
        cronjob["spec"]["schedule"] = installation.schedule
    for obj in objects:
        _add_labels(obj, {INSTALL_LABEL: installation.namespace})
        for container in _containers(obj):
            if container.get("image") == "mxgitops":
                container["image"] = _image(installation.image)
    _set_namespace(objects, installation.namespace, every_subject=True)
    hashed = f"{CONFIG_MAP}-{config_map_hash(config)}"
    config["metadata"]["name"] = hashed
    for obj in objects:
        for container in _containers(obj):
            _rename_config_map(container, hashed)
    return sorted(objects, key=_legacy_order)


def _base() -> list[KubeObject]:
    """The base's kustomization: its resources and generated ConfigMap, in its
    namespace, with its labels."""
    kustomization = _yaml(BASE / "kustomization.yaml")
    objects = [doc for name in kustomization["resources"] for doc in _documents(BASE / name)]
    for generator in kustomization.get("configMapGenerator", []):
        data: dict[str, str] = {}
        for env in generator.get("envs", []):
            data.update(read_env(BASE / env))
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": generator["name"]},
                "data": data,
            }
        )
    _set_namespace(objects, kustomization["namespace"], every_subject=False)
    for labels in kustomization.get("labels", []):
        for obj in objects:
            _add_labels(obj, labels["pairs"])
    return objects


def _add_component(objects: list[KubeObject], name: str) -> None:
    """A component applied to what is rendered so far: its resources added, its JSON
    patches applied to their targets. (Its name references to the CronJob need no
    change: install renames no object of the base.)"""
    directory = COMPONENTS / name
    kustomization = _yaml(directory / "kustomization.yaml")
    for file in kustomization.get("resources", []):
        objects += _documents(directory / file)
    for patch in kustomization.get("patches", []):
        target = patch["target"]
        for obj in objects:
            if obj["kind"] == target["kind"] and obj["metadata"]["name"] == target["name"]:
                json_patch(obj, yaml.safe_load(patch["patch"]))


def json_patch(obj: KubeObject, operations: list[dict[str, Any]]) -> None:
    """RFC 6902's `add` and `replace` of a key or at the end of a list (`/-`), all the
    packaged components use."""
    for operation in operations:
        *parents, last = [
            part.replace("~1", "/").replace("~0", "~") for part in operation["path"].split("/")[1:]
        ]
        where: Any = obj
        for part in parents:
            where = where[int(part)] if isinstance(where, list) else where[part]
        value = copy.deepcopy(operation["value"])
        if operation["op"] == "add" and isinstance(where, list):
            where.insert(len(where) if last == "-" else int(last), value)
        elif operation["op"] in ("add", "replace"):
            where[last] = value
        else:
            raise ValueError(f"a JSON patch operation the renderer does not do: {operation['op']}")


def config_map_hash(config: KubeObject) -> str:
    """kustomize's name suffix of a generated ConfigMap (api/hasher): the first ten hex
    digits of the SHA-256 of its kind, name and data as Go's json.Marshal writes them,
    with 0, 1, 3, a and e spelt g, h, k, m and t. kustomize 5 hashes the name as empty
    (measured: `kubectl kustomize cronjob/base` names mxgitops-config's suffix so)."""
    encoded = {"data": config.get("data") or {}, "kind": "ConfigMap", "name": ""}
    text = json.dumps(encoded, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(raw, escaped)
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    digits = hashlib.sha256(text.encode()).hexdigest()[:10]
    return digits.translate(str.maketrans("013ae", "ghkmt"))


def read_env(path: Path) -> dict[str, str]:
    """A kustomize env file: KEY=VALUE lines; blank lines and # comments skipped."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            found[key] = value
    return found


def _set_namespace(objects: list[KubeObject], namespace: str, *, every_subject: bool) -> None:
    """kustomize's NamespaceTransformer: every namespaced object's namespace; the role
    bindings' ServiceAccount subjects too, all of them (`allServiceAccounts`) or those
    in `default` (its default, `defaultOnly`)."""
    for obj in objects:
        if obj["kind"] not in CLUSTER_SCOPED:
            obj["metadata"]["namespace"] = namespace
        if obj["kind"] in _BINDINGS:
            for subject in obj.get("subjects") or []:
                moved = every_subject or subject.get("namespace") in (None, "default")
                if subject.get("kind") == "ServiceAccount" and moved:
                    subject["namespace"] = namespace


def _add_labels(obj: KubeObject, labels: dict[str, str]) -> None:
    obj["metadata"]["labels"] = {**(obj["metadata"].get("labels") or {}), **labels}


def _containers(obj: KubeObject) -> Iterator[dict[str, Any]]:
    """The containers of a CronJob's or a Deployment's pod template."""
    spec = obj.get("spec") or {}
    if obj["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    template = spec.get("template") if obj["kind"] in ("CronJob", "Deployment") else None
    if template is not None:
        yield from template["spec"].get("containers", [])


def _rename_config_map(container: dict[str, Any], name: str) -> None:
    for source in container.get("envFrom") or []:
        ref = source.get("configMapRef")
        if ref is not None and ref.get("name") == CONFIG_MAP:
            ref["name"] = name
    for variable in container.get("env") or []:
        ref = (variable.get("valueFrom") or {}).get("configMapKeyRef")
        if ref is not None and ref.get("name") == CONFIG_MAP:
            ref["name"] = name


def _image(reference: str) -> str:
    name, tag, digest = image_parts(reference)
    return f"{name}@{digest}" if digest else f"{name}:{tag}" if tag else name


def _legacy_order(obj: KubeObject) -> tuple[int, str, str, str]:
    kind = obj["kind"]
    rank = _FIRST.index(kind) if kind in _FIRST else len(_FIRST) + 1
    rank = len(_FIRST) + 2 + _LAST.index(kind) if kind in _LAST else rank
    metadata = obj["metadata"]
    return rank, kind, metadata.get("namespace", ""), metadata["name"]


def _only(objects: list[KubeObject], kind: str, name: str) -> KubeObject:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _documents(path: Path) -> list[KubeObject]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _yaml(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text())
    assert isinstance(loaded, dict), path
    return loaded
