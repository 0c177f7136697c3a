"""Whether another sync wrote since this one read the cluster: the hand-off record.

A sync reads the cluster before it takes the Lease (so that a no-op sync never
writes), and plans from that read. Once it holds the Lease and is about to
write, its read is stale if another sync wrote in between: a plan made from it
could restart a job that sync just replaced. Reading everything again would
answer that at the cost of the whole first read; this record answers it with
one small object, whatever the number of jobs.

Every sync that wrote replaces the ConfigMap `mxgitops-writes-<instance>` once
its writes are done, before it releases the Lease, so the record's
resourceVersion changes with each sync that wrote. It is listed with the ledger,
first of all reads: a sync that, holding the Lease, finds the record as it read
it knows that no sync wrote after that read. Unless the Lease's last holder did
not hand over cleanly: one stopped in its apply (SIGTERM), or whose record was
refused, releases the Lease marked `writes-unrecorded` (`lease.py`); one that
died leaves the Lease to expire. Either way the next holder reads everything
again. Only that read is saved: the ledger is read again under the Lease always.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from mxgitops.errors import ClusterClientError
from mxgitops.kube.lease import micro_time
from mxgitops.objects import KubeObject, ownership_labels


class RecordAPI(Protocol):
    def create_strict(self, obj: KubeObject) -> KubeObject: ...

    def replace(self, obj: KubeObject) -> KubeObject: ...


def record_name(instance: str) -> str:
    return f"mxgitops-writes-{instance}"


def version(config_maps: Iterable[Mapping[str, Any]], instance: str) -> str:
    """The record's resourceVersion among the listed ConfigMaps; "" when there is none."""
    name = record_name(instance)
    for obj in config_maps:
        if obj["metadata"]["name"] == name:
            return str(obj["metadata"].get("resourceVersion") or "")
    return ""


def record(
    api: RecordAPI,
    *,
    instance: str,
    namespace: str,
    holder: str,
    commit: str,
    now: datetime | None = None,
) -> None:
    """Say that `holder` wrote. Unconditional: only the Lease's holder writes the record,
    and what it says (who, when, to the microsecond) differs each time, so its
    resourceVersion always moves (the API server keeps the version of an update that
    changes nothing). Raises a ClusterError if it cannot be written."""
    obj: KubeObject = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": record_name(instance),
            "namespace": namespace,
            "labels": ownership_labels(instance),
        },
        "data": {
            "holder": holder,
            "commit": commit,
            "at": micro_time(now or datetime.now(UTC)),
        },
    }
    try:
        api.replace(obj)
    except ClusterClientError as exc:
        if exc.status != 404:
            raise
        api.create_strict(obj)  # the first sync that writes
