"""What kube-apiserver refuses in a pod template that the OpenAPI schema lets through.

The JSON schema of PodTemplateSpec (`schema.py`) settles types and unknown
fields, but Kubernetes' own validation (`ValidatePodTemplateSpec`) asks more: a
container without `image` passes the schema, and the batch Job that carries it
is then refused at create (`spec.template.spec.containers[1].image: Required
value`), after its job's Service and other replicas were written. These rules
are checked at validate time instead, each problem with the manifest's field
path. `tests/runtimes/test_rendered_dry_run.py` proves the other direction on the real
API server: every object rendered from a valid manifest passes its dry run.

Only what a manifest controls is checked; what mxgitops sets itself (labels,
restart policy, hostname, subdomain, its environment) is its own business. One rule
is not the API server's: labels of the JobSet and Kueue controllers' domains, which
they set on the pods they make and the sync reads pods by, are refused.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from mxgitops.model import FieldProblem, Path, mappings

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# IANA_SVC_NAME: at most 15 characters, lower-case letters, digits and '-', at least
# one letter, no '-' at either end nor two in a row.
_PORT_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_CONTAINER_KINDS = ("initContainers", "containers")
# Label domains whose keys on a pod are the JobSet and Kueue controllers' to set: the
# sync reads pods by them (a batch job's pod with JobSet's keys is read as a JobSet's).
RESERVED_LABEL_DOMAINS = ("jobset.sigs.k8s.io", "kueue.x-k8s.io")


def pod_template_problems(template: Mapping[str, Any], path: Path) -> list[FieldProblem]:
    """The API server's refusals of the pod template at `path` (`...template`)."""
    problems = list(_reserved_labels(template, path))
    pod_spec = template.get("spec")
    if not isinstance(pod_spec, Mapping):
        return problems
    spec_path: Path = (*path, "spec")
    problems += _container_names(pod_spec, spec_path)
    volumes = _volume_names(pod_spec)
    problems += _duplicate_volumes(pod_spec, spec_path)
    for kind, index, container in _containers(pod_spec):
        where: Path = (*spec_path, kind, index)
        if not str(container.get("image") or "").strip():
            problems.append(FieldProblem((*where, "image"), "required: every container needs one"))
        problems += _ports(container, where)
        problems += _mounts(container, where, volumes)
    return problems


def is_reserved_label(key: str) -> bool:
    """A key of JobSet's or Kueue's domains (or a subdomain of one)."""
    domain = key.partition("/")[0] if "/" in key else ""
    return any(domain == d or domain.endswith(f".{d}") for d in RESERVED_LABEL_DOMAINS)


def _reserved_labels(template: Mapping[str, Any], path: Path) -> Iterator[FieldProblem]:
    metadata = template.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    for key in labels if isinstance(labels, Mapping) else ():
        if is_reserved_label(str(key)):
            yield FieldProblem(
                (*path, "metadata", "labels", key),
                "reserved: JobSet and Kueue set the labels of their domains on the pods "
                "they make, and the sync reads pods by them; remove it",
            )


def _containers(pod_spec: Mapping[str, Any]) -> Iterator[tuple[str, int, Mapping[str, Any]]]:
    for kind in _CONTAINER_KINDS:
        for index, container in enumerate(pod_spec.get(kind) or []):
            if isinstance(container, Mapping):
                yield kind, index, container


def _container_names(pod_spec: Mapping[str, Any], spec_path: Path) -> Iterator[FieldProblem]:
    seen: set[str] = set()
    for kind, index, container in _containers(pod_spec):
        where: Path = (*spec_path, kind, index, "name")
        name = container.get("name")
        if not isinstance(name, str) or not name:
            yield FieldProblem(where, "required: every container needs a name")
        elif len(name) > 63 or not _DNS1123_LABEL.match(name):
            yield FieldProblem(
                where,
                f"{name!r} is not a DNS-1123 label (lower-case letters, digits and '-', "
                "at most 63)",
            )
        elif name in seen:
            yield FieldProblem(where, f"a second container named {name!r}: names are unique")
        if isinstance(name, str):
            seen.add(name)


def _volume_names(pod_spec: Mapping[str, Any]) -> set[str]:
    return {str(v.get("name")) for v in mappings(pod_spec.get("volumes") or [])}


def _duplicate_volumes(pod_spec: Mapping[str, Any], spec_path: Path) -> Iterator[FieldProblem]:
    seen: set[str] = set()
    for index, volume in enumerate(pod_spec.get("volumes") or []):
        name = volume.get("name") if isinstance(volume, Mapping) else None
        where: Path = (*spec_path, "volumes", index, "name")
        if not isinstance(name, str) or not name:
            yield FieldProblem(where, "required: every volume needs a name")
        elif name in seen:
            yield FieldProblem(where, f"a second volume named {name!r}: names are unique")
        else:
            seen.add(name)


def _ports(container: Mapping[str, Any], where: Path) -> Iterator[FieldProblem]:
    names: set[str] = set()
    for index, port in enumerate(container.get("ports") or []):
        if not isinstance(port, Mapping):
            continue
        number = port.get("containerPort")
        if isinstance(number, int) and not 1 <= number <= 65535:
            yield FieldProblem(
                (*where, "ports", index, "containerPort"), f"{number} is not a port (1-65535)"
            )
        name = port.get("name")
        if not isinstance(name, str) or not name:
            continue
        if not _is_port_name(name):
            yield FieldProblem(
                (*where, "ports", index, "name"),
                f"{name!r} is not a port name (at most 15 lower-case letters, digits and "
                "'-', with a letter, no '-' at either end nor two in a row)",
            )
        elif name in names:
            yield FieldProblem(
                (*where, "ports", index, "name"), f"a second port named {name!r} in this container"
            )
        names.add(name)


def _is_port_name(name: str) -> bool:
    return (
        len(name) <= 15
        and _PORT_NAME.match(name) is not None
        and "--" not in name
        and any(c.isalpha() for c in name)
    )


def _mounts(container: Mapping[str, Any], where: Path, volumes: set[str]) -> Iterator[FieldProblem]:
    for index, mount in enumerate(container.get("volumeMounts") or []):
        name = mount.get("name") if isinstance(mount, Mapping) else None
        if isinstance(name, str) and name and name not in volumes:
            yield FieldProblem(
                (*where, "volumeMounts", index, "name"),
                f"no volume named {name!r} in this pod template's spec.volumes",
            )
