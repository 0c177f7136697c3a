"""A fake kubelet: one Node, and pods moved through their lives through the real API.

There is no container runtime. The Node is registered Ready with room for GPUs, at
127.0.0.1 (the API server reaches a node's kubelet at its address: it must be loopback),
so the real scheduler binds pods to it (or leaves them Pending with its own
Unschedulable reason when they ask for more than it has). A pod then stays as
the scheduler left it until a test says what its containers did; the status
written is the one ``tests/kubeapi/podstatus.py`` computes for the double, so a
test reads the same pod on either backend. What a kubelet does on its own, it
does here too, in a background thread: a pod being deleted on this node is
removed at once (its containers "stopped"), as the kubelet confirms a graceful
deletion. And it serves the kubelet's ``/containerLogs/`` endpoint on loopback,
which kube-apiserver proxies ``pods/{name}/log`` to: every pod of a batch Job
logs what the test set for that Job (``container_log``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import ssl
import threading
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import requests

from tests.kubeapi import podstatus
from tests.kubeapi.podlogs import JOB_NAME_LABEL, tail

from .pki import KeyPair
from .rest import Rest

NODE = "mxgitops-node"
CAPACITY = {
    "cpu": "64",
    "memory": "512Gi",
    "pods": "20000",
    "ephemeral-storage": "1Ti",
    "nvidia.com/gpu": "8",
}
# Status writes in flight at once when many pods move together: enough to keep the API
# server busy, within the client's pool of ten connections (one is the finalizer's watch).
WRITERS = 8


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_status(kubelet_port: int) -> dict[str, Any]:
    stamp = now()
    conditions = [
        ("Ready", "True", "KubeletReady"),
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
    ]
    return {
        "capacity": CAPACITY,
        "allocatable": CAPACITY,
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        "conditions": [
            {
                "type": kind,
                "status": value,
                "reason": reason,
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
            }
            for kind, value, reason in conditions
        ],
        "nodeInfo": {
            "architecture": "amd64",
            "operatingSystem": "linux",
            "kubeletVersion": "fake",
            "kubeProxyVersion": "",
            "containerRuntimeVersion": "fake://0",
            "kernelVersion": "",
            "osImage": "",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
        },
    }


class LogServer(ThreadingHTTPServer):
    """The kubelet's ``GET /containerLogs/{namespace}/{pod}/{container}``, over TLS."""

    daemon_threads = True

    def __init__(self, rest: Rest, serving: KeyPair) -> None:
        super().__init__(("127.0.0.1", 0), LogHandler)
        self.rest = rest
        self.texts: dict[tuple[str, str], str] = {}
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(serving.cert), str(serving.key))
        self.socket = context.wrap_socket(self.socket, server_side=True)
        threading.Thread(target=self.serve_forever, name="kubelet-logs", daemon=True).start()


class LogHandler(BaseHTTPRequestHandler):
    server: LogServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silent."""

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        if len(parts) != 4 or parts[0] != "containerLogs":
            self.send_error(404)
            return
        _, namespace, pod, _container = parts
        found = self.server.rest.get_or_none(f"/api/v1/namespaces/{namespace}/pods/{pod}")
        if found is None:
            self.send_error(404)
            return
        job = (found["metadata"].get("labels") or {}).get(JOB_NAME_LABEL, "")
        data = tail(self.server.texts.get((namespace, job), ""), dict(parse_qsl(url.query)))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class FakeKubelet:
    """Register the node, finalize deleted pods in the background, serve container logs,
    write pod status on demand."""

    def __init__(self, rest: Rest, serving: KeyPair) -> None:
        self.rest = rest
        self.logs = LogServer(rest, serving)
        self._stop = threading.Event()
        self._ips = itertools.count(2)
        self._thread = threading.Thread(target=self._finalize_loop, name="kubelet", daemon=True)

    def start(self) -> FakeKubelet:
        self.rest.create(
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": NODE,
                    "labels": {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux"},
                },
            },
        )
        node = self.rest.get(f"/api/v1/nodes/{NODE}")
        node["status"] = node_status(self.logs.server_address[1])
        self.rest.put(f"/api/v1/nodes/{NODE}/status", node)
        # TaintNodesByCondition admission marks a new node not-ready; the node
        # lifecycle controller would lift it once the node reports Ready.
        self.rest.patch(f"/api/v1/nodes/{NODE}", {"spec": {"taints": None}})
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.logs.shutdown()
        self.logs.server_close()

    # -- pods being deleted ------------------------------------------------------
    def _finalize_loop(self) -> None:
        """List the node's pods once, then watch on from the list's version: a watch
        ends every second (so that ``stop`` is quick) and the next goes on from the
        last version seen; only an error (the version gone, the API server restarted)
        lists again. (Listing every second served every pod of the node, each time.)"""
        selector = f"spec.nodeName={NODE}"
        version = None
        while not self._stop.is_set():
            try:
                if version is None:
                    listed = self.rest.get("/api/v1/pods", fieldSelector=selector)
                    for pod in listed["items"]:
                        self._finalize(pod)
                    version = listed["metadata"]["resourceVersion"]
                for event in self.rest.watch(
                    "/api/v1/pods",
                    fieldSelector=selector,
                    resourceVersion=version,
                    allowWatchBookmarks="true",
                    timeoutSeconds=1,
                ):
                    if event["type"] == "ERROR":  # 410 Gone: list again
                        version = None
                        break
                    version = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._finalize(event["object"])
            except (requests.RequestException, json.JSONDecodeError, KeyError):
                version = None
                if self._stop.wait(0.1):  # the API server is stopping or restarting
                    return

    def _finalize(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if not meta.get("deletionTimestamp"):
            return
        with contextlib.suppress(requests.RequestException):
            self.rest.delete(
                f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}},
            )

    # -- pods a test moves -------------------------------------------------------
    def step(self, pod: dict[str, Any], step: podstatus.Step) -> dict[str, Any]:
        """Write the status ``step`` gives a bound pod; retried on write conflicts."""
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        for _ in range(10):
            current = self.rest.get(path)
            current["status"] = podstatus.next_status(
                current,
                step,
                now=now(),
                container_id=lambda: f"containerd://{uuid.uuid4().hex}",
                pod_ip=lambda: f"10.244.0.{next(self._ips) % 250 + 2}",
            )
            try:
                return self.rest.put(f"{path}/status", current)
            except requests.HTTPError as err:
                if err.response is None or err.response.status_code != 409:
                    raise
        raise RuntimeError(f"pod {meta['name']}: status kept conflicting")

    def step_all(
        self, pods: Sequence[dict[str, Any]], step: podstatus.Step
    ) -> list[dict[str, Any]]:
        """:meth:`step` for many bound pods, ``WRITERS`` at a time (a hundred pods failing
        at once after a node loss); in the order given."""
        with ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="kubelet-step") as pool:
            return list(pool.map(lambda pod: self.step(pod, step), pods))
