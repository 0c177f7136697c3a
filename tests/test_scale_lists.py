"""LISTs in pages (`limit`/`continue`): every object once, whatever the page size,
in one request per page; no managedFields kept. Run on both backends: the real
kube-apiserver is the judge of what `continue` means."""

from __future__ import annotations

from typing import Any

import pytest

from mxgitops import cluster
from mxgitops.errors import ClusterClientError
from mxgitops.objects import Kind, ownership_labels, ownership_selector
from tests.kubeapi.harness import KubeAPI

NS = "ml"
OBJECTS = 23


def config_map(name: str, instance: str = "t1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "labels": ownership_labels(instance)},
        "data": {"k": "v"},
    }


@pytest.fixture
def populated(kubeapi: KubeAPI) -> KubeAPI:
    for n in range(OBJECTS):
        kubeapi.create(config_map(f"cm-{n:02d}"), NS)
    kubeapi.create(config_map("not-ours", instance="other"), NS)
    return kubeapi


@pytest.mark.parametrize("page_size", [1, 10, 23, 1000])
def test_a_list_in_pages_returns_every_object_once(populated: KubeAPI, page_size: int) -> None:
    kube = cluster.connect(kubeconfig=populated.kubeconfig)
    kube.page_size = page_size
    populated.clear_log()
    items = kube.list_all(Kind.CONFIG_MAP, ownership_selector("t1"), NS)
    names = [o["metadata"]["name"] for o in items]
    assert sorted(names) == [f"cm-{n:02d}" for n in range(OBJECTS)]
    assert len(set(names)) == OBJECTS
    assert all((o["kind"], o["apiVersion"]) == ("ConfigMap", "v1") for o in items)
    assert not any("managedFields" in o["metadata"] for o in items)
    lists = [e for e in populated.request_log if e["method"] == "GET"]
    pages = -(-OBJECTS // page_size)  # the real server may add an empty last page
    assert pages <= len(lists) <= pages + 1
    assert all(e["query"]["limit"] == str(page_size) for e in lists)
    assert "continue" not in lists[0]["query"]
    assert all(e["query"].get("continue") for e in lists[1:])


def test_live_state_of_many_objects_in_few_requests(populated: KubeAPI) -> None:
    """The default page holds 1,000 objects: a list of fewer is one request."""
    kube = cluster.connect(kubeconfig=populated.kubeconfig)
    populated.clear_log()
    assert len(kube.list_all(Kind.CONFIG_MAP, ownership_selector("t1"))) == OBJECTS
    assert len(populated.request_log) == 1


@pytest.mark.double_only("a continuation the server has forgotten (410) is made up here")
def test_an_expired_continuation_starts_the_list_over(populated: KubeAPI) -> None:
    kube = cluster.connect(kubeconfig=populated.kubeconfig, retry=cluster.RetryPolicy(attempts=1))
    kube.page_size = 10
    real_request = kube._request
    expired: list[str] = []

    def request(method: str, path: str, **kwargs: Any) -> Any:
        query = kwargs.get("query") or {}
        if "continue" in query and not expired:
            expired.append(query["continue"])
            raise ClusterClientError("too old", status=410, reason="Expired")
        return real_request(method, path, **kwargs)

    kube._request = request  # type: ignore[method-assign]
    items = kube.list_all(Kind.CONFIG_MAP, ownership_selector("t1"), NS)
    assert expired and len(items) == OBJECTS
    assert len({o["metadata"]["name"] for o in items}) == OBJECTS


def batch_job(name: str) -> dict[str, Any]:
    container = {"name": "mxnet", "image": "mxnet/python:1.9.1"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": ownership_labels("t1"),
            "annotations": {"mxgitops.io/spec-hash": "abc"},
        },
        "spec": {
            "suspend": True,  # no pods on the real backend: the test reads the Job alone
            "backoffLimit": 2,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


def test_live_jobs_are_kept_without_their_pod_template(kubeapi: KubeAPI) -> None:
    """What planning reads stays (metadata, run-policy fields, status); the pod template,
    most of a Job's size and never read, goes."""
    kubeapi.create(batch_job("a"), NS)
    kube = cluster.connect(kubeconfig=kubeapi.kubeconfig)
    (job,) = kube.list_live(ownership_selector("t1")).jobs
    assert "template" not in job["spec"]
    assert (job["spec"]["suspend"], job["spec"]["backoffLimit"]) == (True, 2)
    assert job["metadata"]["annotations"]["mxgitops.io/spec-hash"] == "abc"
    assert job["metadata"]["labels"] == ownership_labels("t1")
    assert job["metadata"]["uid"] and job["metadata"]["resourceVersion"]
    assert "status" in job and (job["kind"], job["apiVersion"]) == ("Job", "batch/v1")
    # A LIST of anything else keeps the whole object.
    (whole,) = kube.list_all(Kind.JOB, ownership_selector("t1"))
    assert whole["spec"]["template"]["spec"]["containers"][0]["name"] == "mxnet"
