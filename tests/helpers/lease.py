"""Helpers of `tests/state/test_lease.py` that other test modules use too."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from mxgitops.errors import ClusterClientError
from mxgitops.kube import lease
from mxgitops.objects import KubeObject, ObjectRef

REF = lease.lease_ref("t1", "ml")


class FakeLeases:
    """Create fails on an existing name, replace on a stale resourceVersion: like the API."""

    def __init__(self) -> None:
        self.objects: dict[ObjectRef, KubeObject] = {}
        self.writes: list[str] = []
        self.rv = 0
        self.fail_replace: Exception | None = None

    def get(self, ref: ObjectRef) -> KubeObject | None:
        obj = self.objects.get(ref)
        return copy.deepcopy(obj) if obj is not None else None

    def create_strict(self, obj: KubeObject) -> KubeObject:
        self.writes.append("create")
        ref = ObjectRef.of(obj)
        if ref in self.objects:
            raise ClusterClientError("exists", status=409, reason="AlreadyExists")
        return self._store(obj)

    def replace(self, obj: KubeObject) -> KubeObject:
        self.writes.append("replace")
        if self.fail_replace is not None:
            raise self.fail_replace
        current = self.objects[ObjectRef.of(obj)]
        if obj["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ClusterClientError("conflict", status=409, reason="Conflict")
        return self._store(obj)

    def _store(self, obj: KubeObject) -> KubeObject:
        self.rv += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[ObjectRef.of(stored)] = stored
        return copy.deepcopy(stored)

    def put(self, holder: str | None, renewed: datetime, duration: int = 60) -> None:
        stamp = renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec: dict[str, Any] = {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": stamp,
            "renewTime": stamp,
        }
        self._store(
            {"kind": "Lease", "metadata": {"name": REF.name, "namespace": "ml"}, "spec": spec}
        )
        self.writes.clear()
