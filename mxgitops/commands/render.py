"""`mxgitops render`: the Kubernetes objects each valid job of some manifests becomes.

What a sync would create for each job, on the runtime it would run on (batch Jobs and a
scheduler Service, or one JobSet), as `helm template` and `flux build` print theirs: a
reviewer sees exactly what a manifest runs, and `kubectl diff -f -` or
`kubectl apply --dry-run=server -f -` can judge it against a cluster. Pure but for
reading the files: no cluster is asked (a WorkloadPriorityClass is therefore never
assumed to exist; the pods' priorityClassName carries the priority).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from mxgitops.manifests.loading import LoadResult
from mxgitops.objects import KubeObject
from mxgitops.runtimes import registry
from mxgitops.runtimes.shared.accelerators import AcceleratorConfig
from mxgitops.runtimes.shared.podtemplate import RenderContext


@dataclass(frozen=True)
class Rendered:
    objects: tuple[KubeObject, ...]
    loaded: LoadResult


def render_loaded(
    loaded: LoadResult,
    *,
    instance: str,
    accelerators: Mapping[str, AcceleratorConfig] | None = None,
) -> Rendered:
    """Every valid job's objects, jobs in file order, each job's in creation order."""
    ctx = RenderContext(instance=instance, accelerators=accelerators or {})
    found: list[KubeObject] = []
    for job in loaded.jobs:
        found += registry.render(job, ctx)
    return Rendered(tuple(found), loaded)


class _WrittenOut(yaml.SafeDumper):
    """A dumper that writes every value where it is: an object sharing a value between
    two places (a JobSet's replicated jobs, one pod template's volumes) would otherwise
    get an anchor and an alias, which hide from a reviewer what each pod gets."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def as_yaml(objects: Sequence[KubeObject]) -> str:
    """A stream of YAML documents, each object as the API takes it, with no anchors."""
    return "".join(
        "---\n" + yaml.dump(obj, Dumper=_WrittenOut, sort_keys=False, default_flow_style=False)
        for obj in objects
    )


def as_json(objects: Sequence[KubeObject]) -> str:
    """One `v1 List` (what `kubectl get -o json` prints for several objects)."""
    listed: dict[str, Any] = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    return json.dumps(listed, indent=2) + "\n"
