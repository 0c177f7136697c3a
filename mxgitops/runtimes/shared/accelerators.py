"""Accelerator support: host paths, mounts and env vars for containers that need a device.

The seed's ControllerConfig mapped a resource name (e.g. `nvidia.com/gpu`) to
host-path volumes (driver libraries) and environment variables. Every `mxnet`
container that requests or limits that resource gets them added. The user's
own pod always wins: an existing volume name, mount or env var is left alone,
so a manifest can override what the cluster operator configured.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mxgitops.errors import ConfigError
from mxgitops.model import CONTAINER_NAME

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class AcceleratorVolume:
    name: str
    host_path: str
    mount_path: str
    # Driver libraries are read, not written: a training container that could write
    # them would change what every later pod on the node loads. The operator's file
    # may say `readOnly: false` for a path that must be written.
    read_only: bool = True


@dataclass(frozen=True)
class AcceleratorEnvVar:
    name: str
    value: str


@dataclass(frozen=True)
class AcceleratorConfig:
    """What a container using one accelerator resource needs from the host."""

    volumes: tuple[AcceleratorVolume, ...] = ()
    env_vars: tuple[AcceleratorEnvVar, ...] = ()

    @classmethod
    def from_dict(cls, raw: object, *, where: str = "accelerator") -> AcceleratorConfig:
        """Parse `{"volumes": [{name, hostPath, mountPath}], "envVars": [{name, value}]}`."""
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{where}: expected a mapping with volumes and envVars")
        _no_unknown_keys(raw, {"volumes", "envVars"}, where)
        volumes = tuple(
            AcceleratorVolume(
                name=_dns_label(item, "name", f"{where}.volumes[{i}]"),
                host_path=_absolute_path(item, "hostPath", f"{where}.volumes[{i}]"),
                mount_path=_absolute_path(item, "mountPath", f"{where}.volumes[{i}]"),
                read_only=_flag(item, "readOnly", f"{where}.volumes[{i}]", default=True),
            )
            for i, item in enumerate(
                _entries(raw, "volumes", {"name", "hostPath", "mountPath", "readOnly"}, where)
            )
        )
        env_vars = tuple(
            AcceleratorEnvVar(
                name=_string(item, "name", f"{where}.envVars[{i}]", allow_empty=False),
                value=_string(item, "value", f"{where}.envVars[{i}]", allow_empty=True),
            )
            for i, item in enumerate(_entries(raw, "envVars", {"name", "value"}, where))
        )
        return cls(volumes=volumes, env_vars=env_vars)


def parse_accelerators(raw: object, *, where: str = "accelerators") -> dict[str, AcceleratorConfig]:
    """Parse the seed's `accelerators` mapping: resource name -> AcceleratorConfig."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping of resource name to accelerator config")
    configs: dict[str, AcceleratorConfig] = {}
    for resource, value in raw.items():
        if not isinstance(resource, str) or not resource:
            raise ConfigError(
                f"{where}: resource names must be non-empty strings, got {resource!r}"
            )
        configs[resource] = AcceleratorConfig.from_dict(value, where=f"{where}[{resource!r}]")
    return configs


def uses_resource(container: Mapping[str, Any], resource: str) -> bool:
    resources = container.get("resources") or {}
    return any(resource in (resources.get(kind) or {}) for kind in ("requests", "limits"))


def apply_accelerators(
    pod_spec: dict[str, Any], accelerators: Mapping[str, AcceleratorConfig]
) -> None:
    """Add the configured volumes, mounts and env vars to `pod_spec` in place.

    `pod_spec` must be the renderer's own copy. Resources are visited in sorted
    order so the result does not depend on the config's key order.
    """
    for container in pod_spec.get("containers") or []:
        if container.get("name") != CONTAINER_NAME:
            continue
        for resource in sorted(accelerators):
            if uses_resource(container, resource):
                _add(pod_spec, container, accelerators[resource])


def _add(pod_spec: dict[str, Any], container: dict[str, Any], config: AcceleratorConfig) -> None:
    for volume in config.volumes:
        volumes = pod_spec.get("volumes") or []
        if all(v.get("name") != volume.name for v in volumes):
            pod_spec["volumes"] = [
                *volumes,
                {"name": volume.name, "hostPath": {"path": volume.host_path}},
            ]
        mounts = container.get("volumeMounts") or []
        if all(
            m.get("name") != volume.name and m.get("mountPath") != volume.mount_path for m in mounts
        ):
            container["volumeMounts"] = [
                *mounts,
                {"name": volume.name, "mountPath": volume.mount_path, "readOnly": volume.read_only},
            ]
    for var in config.env_vars:
        env = container.get("env") or []
        if all(e.get("name") != var.name for e in env):
            container["env"] = [*env, {"name": var.name, "value": var.value}]


def _entries(
    raw: Mapping[str, Any], key: str, allowed: set[str], where: str
) -> list[Mapping[str, Any]]:
    items = raw.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        raise ConfigError(f"{where}.{key}: expected a list")
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ConfigError(f"{where}.{key}[{i}]: expected a mapping")
        _no_unknown_keys(item, allowed, f"{where}.{key}[{i}]")
    return items


def _no_unknown_keys(raw: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )


def _string(raw: Mapping[str, Any], key: str, where: str, *, allow_empty: bool) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or (not value and not allow_empty):
        raise ConfigError(f"{where}.{key}: expected a {'' if allow_empty else 'non-empty '}string")
    return value


def _flag(raw: Mapping[str, Any], key: str, where: str, *, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}.{key}: expected true or false, got {value!r}")
    return value


def _dns_label(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = _string(raw, key, where, allow_empty=False)
    if not _DNS1123_LABEL.match(value) or len(value) > 63:
        raise ConfigError(f"{where}.{key}: {value!r} is not a valid volume name (DNS-1123 label)")
    return value


def _absolute_path(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = _string(raw, key, where, allow_empty=False)
    if not value.startswith("/"):
        raise ConfigError(f"{where}.{key}: {value!r} must be an absolute path")
    return value
