"""Watch, deletion propagation and finalizers, through the Python client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client import ApiException, V1DeleteOptions

from tests.kubeapi.clients import Clients, clients_for, job_manifest, raw
from tests.kubeapi.harness import KubeAPI

NS = "default"


@pytest.fixture
def k8s(kubeapi: KubeAPI) -> Iterator[Clients]:
    clients = clients_for(kubeapi)
    yield clients
    clients.api.close()


def configmap(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}},
    }


def events(k8s: Clients, count: int, **kwargs: Any) -> list[tuple[str, str]]:
    w = watch.Watch()
    seen: list[tuple[str, str]] = []
    for event in w.stream(k8s.core.list_namespaced_config_map, NS, **kwargs):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == count:
            w.stop()
    return seen


def test_watch_from_resource_version(k8s: Clients) -> None:
    start = k8s.core.list_namespaced_config_map(NS).metadata.resource_version
    k8s.core.create_namespaced_config_map(NS, configmap("a", {"w": "1"}))
    k8s.core.patch_namespaced_config_map("a", NS, {"data": {"k": "v"}})
    k8s.core.create_namespaced_config_map(NS, configmap("b"))
    k8s.core.delete_namespaced_config_map("a", NS)
    assert events(k8s, 4, resource_version=start) == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]
    assert events(k8s, 2, resource_version=start, label_selector="w=1") == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
    ]


def test_watch_without_resource_version_starts_with_current_state(k8s: Clients) -> None:
    k8s.core.create_namespaced_config_map(NS, configmap("a"))
    assert events(k8s, 1) == [("ADDED", "a")]


def test_watch_relabel_leaves_selection_and_times_out(k8s: Clients) -> None:
    start = k8s.core.list_namespaced_config_map(NS).metadata.resource_version
    k8s.core.create_namespaced_config_map(NS, configmap("a", {"w": "1"}))
    k8s.core.patch_namespaced_config_map("a", NS, {"metadata": {"labels": {"w": "2"}}})
    w = watch.Watch()
    seen = [
        (e["type"], e["object"].metadata.name)
        for e in w.stream(
            k8s.core.list_namespaced_config_map,
            NS,
            label_selector="w=1",
            resource_version=start,
            timeout_seconds=1,
        )
    ]
    assert seen == [("ADDED", "a"), ("DELETED", "a")]


@pytest.mark.double_only("compacts the double's watch history on demand")
def test_watch_too_old_is_gone(kubeapi: KubeAPI, k8s: Clients) -> None:
    k8s.core.create_namespaced_config_map(NS, configmap("a"))
    kubeapi.compact()
    w = watch.Watch()
    with pytest.raises(ApiException) as info:
        for _ in w.stream(k8s.core.list_namespaced_config_map, NS, resource_version="1"):
            pass
    assert info.value.status == 410
    assert "Expired: too old resource version: 1" in str(info.value.reason)


def test_delete_job_background_foreground_orphan(k8s: Clients, kubeapi: KubeAPI) -> None:
    for name in ("bg", "fg", "orphan", "default"):
        k8s.batch.create_namespaced_job(NS, job_manifest(name))
    kubeapi.run_job_controller()
    assert len(kubeapi.objects("pods")) == 4

    def pods_of(job: str) -> list[dict[str, Any]]:
        return [p for p in kubeapi.objects("pods") if p["metadata"]["labels"]["job-name"] == job]

    k8s.batch.delete_namespaced_job("bg", NS, propagation_policy="Background")
    kubeapi.settle()  # the real garbage collector acts after the answer, the double before
    assert pods_of("bg") == []
    _, _, body = raw(
        kubeapi,
        "DELETE",
        "/apis/batch/v1/namespaces/default/jobs/fg",
        {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"},
    )
    assert body["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert body["metadata"]["deletionTimestamp"]
    kubeapi.settle()
    assert pods_of("fg") == [] and kubeapi.get("jobs", "fg") is None
    k8s.batch.delete_namespaced_job("orphan", NS, body=V1DeleteOptions(propagation_policy="Orphan"))
    kubeapi.settle()
    [orphan] = pods_of("orphan")
    assert "ownerReferences" not in orphan["metadata"]
    status, headers, deleted = raw(
        kubeapi, "DELETE", "/apis/batch/v1/namespaces/default/jobs/default"
    )
    assert status == 200 and deleted["kind"] == "Job"
    assert "child pods are preserved by default" in headers["Warning"]
    assert len(pods_of("default")) == 1


def test_finalizers_hold_deletion(k8s: Clients, kubeapi: KubeAPI) -> None:
    body = configmap("held")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    k8s.core.create_namespaced_config_map(NS, body)
    k8s.core.delete_namespaced_config_map("held", NS, grace_period_seconds=0)
    held = k8s.core.read_namespaced_config_map("held", NS)
    assert held.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as info:
        k8s.core.patch_namespaced_config_map(
            "held", NS, {"metadata": {"finalizers": ["example.com/hold", "new"]}}
        )
    assert info.value.status == 422
    k8s.core.patch_namespaced_config_map("held", NS, {"metadata": {"finalizers": None}})
    assert kubeapi.get("configmaps", "held") is None


def test_delete_preconditions(k8s: Clients) -> None:
    k8s.core.create_namespaced_config_map(NS, configmap("a"))
    with pytest.raises(ApiException) as info:
        k8s.core.delete_namespaced_config_map(
            "a", NS, body=V1DeleteOptions(preconditions={"uid": "nope"})
        )
    assert info.value.status == 409
