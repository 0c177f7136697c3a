"""What is valid in a manifest but must not pass in silence: its warnings (pure).

An older API version, an empty status, scheduling labels mxgitops does not carry
where a batch scheduler would read them, a GPU resource Kubernetes removed, a pod
template's hostname or subdomain, which mxgitops replaces. `spec.read_manifest`
adds them to the job with each dialect's own warnings (`MxJob.warnings`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mxgitops.manifests.dialects.base import Version
from mxgitops.manifests.podrules import is_reserved_label
from mxgitops.model import FieldProblem, MxJob, Path, ReplicaSpec
from mxgitops.runtimes.shared import scheduling

REMOVED_RESOURCES = {
    "alpha.kubernetes.io/nvidia-gpu": "removed in Kubernetes 1.10: no node offers it, so "
    "these pods would stay Pending forever; use nvidia.com/gpu",
}
# Labels and annotations read by batch schedulers on the objects they admit.
_SCHEDULING_PREFIXES = (
    "kueue.x-k8s.io/",
    "scheduling.x-k8s.io/",
    "volcano.sh/",
    "scheduling.volcano.sh/",
    "scheduling.k8s.io/",
)


def manifest_warnings(doc: Mapping[str, Any], version: Version, job: MxJob) -> list[FieldProblem]:
    """What is valid but must not pass in silence, in document order."""
    found = [note for note in [version.older_version_note()] if note is not None]
    if doc.get("status") == {}:
        found.append(FieldProblem(("status",), "an empty status is ignored; a manifest has none"))
    metadata: Mapping[str, Any] = doc.get("metadata") or {}
    found += _scheduling_keys(
        metadata,
        ("metadata",),
        "mxgitops carries it onto none of the objects it creates",
        frozenset({("labels", scheduling.QUEUE_LABEL)}),  # the job's queue: it is read
    )
    for replica in job.replica_specs:
        template_meta: Mapping[str, Any] = replica.template.get("metadata") or {}
        found += _scheduling_keys(
            template_meta,
            (*replica.path, "template", "metadata"),
            "mxgitops carries it onto the pods only, not onto the batch Jobs a batch scheduler "
            "admits",
            refused=is_reserved_label,  # a problem of its own (podrules.py)
        )
        found += _removed_resources(replica)
        found += _addressing_fields(replica)
    return found


def _addressing_fields(replica: ReplicaSpec) -> list[FieldProblem]:
    """A template's hostname or subdomain is replaced: they make each pod's DNS name,
    the address every other process has of it."""
    pod_spec: Mapping[str, Any] = replica.template.get("spec") or {}
    return [
        FieldProblem(
            (*replica.path, "template", "spec", name),
            f"replaced: mxgitops sets every pod's {name} (its DNS name, the address in "
            "MX_CONFIG and DMLC_PS_ROOT_URI)",
        )
        for name in ("hostname", "subdomain")
        if name in pod_spec
    ]


def _scheduling_keys(
    metadata: Mapping[str, Any],
    path: Path,
    carried: str,
    used: frozenset[tuple[str, str]] = frozenset(),
    refused: Callable[[str], bool] = lambda key: False,
) -> list[FieldProblem]:
    found = []
    for field_name in ("labels", "annotations"):
        for key in metadata.get(field_name) or {}:
            skipped = (field_name, key) in used or (field_name == "labels" and refused(key))
            if str(key).startswith(_SCHEDULING_PREFIXES) and not skipped:
                found.append(
                    FieldProblem(
                        (*path, field_name, key),
                        f"a scheduling {field_name[:-1]}, but {carried}: its scheduler "
                        "(Kueue, Volcano, scheduler-plugins) never sees the job, which runs "
                        "unqueued",
                    )
                )
    return found


def _removed_resources(replica: ReplicaSpec) -> list[FieldProblem]:
    found = []
    pod_spec: Mapping[str, Any] = replica.template.get("spec") or {}
    for kind in ("initContainers", "containers"):
        for index, container in enumerate(pod_spec.get(kind) or []):
            resources = container.get("resources") if isinstance(container, Mapping) else None
            for section in ("limits", "requests"):
                for name in (resources or {}).get(section) or {}:
                    if name in REMOVED_RESOURCES:
                        path = (*replica.path, "template", "spec", kind, index, "resources")
                        found.append(
                            FieldProblem(
                                (*path, section, name), f"{name} was {REMOVED_RESOURCES[name]}"
                            )
                        )
    return found
