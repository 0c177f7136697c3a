"""kube/cronjobs.py on both backends: a namespace's Jobs listed with the list's
resourceVersion, watched from it (each event as it comes, the stream's end at its
timeoutSeconds), an expired resourceVersion told apart, a create that finds its Job made."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mxgitops.kube import cluster
from mxgitops.kube.cronjobs import WatchExpired
from mxgitops.objects import KubeObject

NAMESPACE = "default"
DEADLINE = 20.0


def job(name: str) -> KubeObject:
    container = {"name": "c", "image": "busybox", "command": ["true"]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }


def test_a_watch_from_the_lists_version_sees_each_job_as_it_comes(kubeapi: Any) -> None:
    connection = cluster.connect(kubeconfig=kubeapi.kubeconfig)
    assert connection.create_job(job("before"))
    listed, version = connection.list_jobs(NAMESPACE)
    assert [j["metadata"]["name"] for j in listed] == ["before"]

    seen: list[tuple[str, str]] = []
    arrived = threading.Event()

    def on_event(kind: str, obj: KubeObject) -> None:
        seen.append((kind, obj["metadata"]["name"]))
        if obj["metadata"]["name"] == "after":
            arrived.set()

    ended: list[str] = []
    watcher = threading.Thread(
        target=lambda: ended.append(connection.watch_jobs(NAMESPACE, version, on_event, timeout=3)),
        daemon=True,
    )
    watcher.start()
    assert connection.create_job(job("after"))
    assert arrived.wait(DEADLINE), seen  # while the watch is open, not at its end
    assert ("ADDED", "after") in seen and ("ADDED", "before") not in seen
    watcher.join(DEADLINE)
    assert not watcher.is_alive() and ended and int(ended[0]) > int(version)


def test_a_job_made_before_is_not_made_again(kubeapi: Any) -> None:
    connection = cluster.connect(kubeconfig=kubeapi.kubeconfig)
    assert connection.create_job(job("once"))
    assert not connection.create_job(job("once"))
    assert len(connection.list_jobs(NAMESPACE)[0]) == 1


@pytest.mark.double_only("compacting the watch history on demand")
def test_an_expired_version_is_watch_expired(kubeapi: Any) -> None:
    connection = cluster.connect(kubeconfig=kubeapi.kubeconfig)
    _, version = connection.list_jobs(NAMESPACE)
    connection.create_job(job("later"))
    kubeapi.compact()
    with pytest.raises(WatchExpired):
        connection.watch_jobs(NAMESPACE, version, lambda kind, obj: None, timeout=3)
