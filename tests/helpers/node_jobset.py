"""Helpers of `tests/node/test_jobset.py` that other test modules use too."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import requests
import yaml

from tests.controlplane.harness import RealCluster
from tests.controlplane.rest import Rest
from tests.helpers.node_training import (
    TRAIN_TIMEOUT,
    training_container,
)

NS = "default"


QUEUE = "team"


ROLES = {"scheduler": 1, "server": 2, "worker": 3}


def replica(count: int) -> dict[str, Any]:
    return {
        "replicas": count,
        "restartPolicy": "Never",
        "template": {"spec": {"containers": [training_container()]}},
    }


def queued_mxjob(name: str, queue: str = QUEUE) -> str:
    """A Kubeflow MXJob naming a Kueue LocalQueue: it runs on JobSet, admitted by Kueue."""
    return yaml.safe_dump(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MXJob",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "jobMode": "MXTrain",
                "runPolicy": {"schedulingPolicy": {"queue": queue}},
                "mxReplicaSpecs": {
                    "Scheduler": replica(ROLES["scheduler"]),
                    "Server": replica(ROLES["server"]),
                    "Worker": replica(ROLES["worker"]),
                },
            },
        }
    )


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for found in (obj.get("status") or {}).get("conditions") or []:
        if found["type"] == kind and found["status"] == "True":
            return dict(found)
    return None


def role_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"])


def container_started(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any(
        s["name"] == "mxnet" and ("running" in s["state"] or "terminated" in s["state"])
        for s in statuses
    )


@dataclass
class LogFollower:
    """Each pod's container log as it is written (``follow=true``), one thread a pod:
    kept here when the pod and its log are deleted."""

    cluster: RealCluster
    texts: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    threads: dict[str, threading.Thread] = field(default_factory=dict)

    def follow(self, pod: str) -> None:
        if pod not in self.threads:
            thread = threading.Thread(target=self._read, args=(pod,), daemon=True)
            self.threads[pod] = thread
            thread.start()

    def _read(self, pod: str) -> None:
        plane = self.cluster.plane
        assert plane.pki is not None and plane.admin is not None
        rest = Rest(plane.url, plane.pki.ca, plane.admin.cert, plane.admin.key)  # a session each
        path = f"/api/v1/namespaces/{NS}/pods/{pod}/log"
        chunks: list[str] = []
        try:
            with rest.session.get(
                plane.url + path,
                params={"container": "mxnet", "follow": "true"},
                stream=True,
                timeout=TRAIN_TIMEOUT,
            ) as response:
                response.raise_for_status()
                for chunk in response.iter_content(chunk_size=None, decode_unicode=True):
                    chunks.append(chunk)
                    self.texts[pod] = "".join(chunks)
        except requests.RequestException as err:
            self.errors[pod] = str(err)
        self.texts[pod] = "".join(chunks)

    def done(self, pod: str) -> bool:
        thread = self.threads.get(pod)
        return thread is not None and not thread.is_alive()
