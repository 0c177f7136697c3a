"""A Deployment's pod on the real node, made as its ReplicaSet would make it: the tests'
control planes run no Deployment or ReplicaSet controller (tests/controlplane/
launcher.py's CONTROLLERS: nothing else of mxgitops runs in a Deployment), and the
address a NodePort Service answers on from the host."""

from __future__ import annotations

from tests.controlplane.harness import RealCluster


def pod_of_deployment(cluster: RealCluster, namespace: str, name: str) -> str:
    """The pod of Deployment `namespace`/`name`'s template, created; its name."""
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
    template = cluster.rest.get(path)["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name}-0", "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    }
    status, _, body = cluster.raw("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
    assert status == 201, body
    return f"{name}-0"


def ready(cluster: RealCluster, namespace: str, pod: str) -> bool:
    found = cluster.rest.get(f"/api/v1/namespaces/{namespace}/pods/{pod}")
    conditions = (found.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def node_port(cluster: RealCluster, namespace: str, service: str) -> tuple[str, int]:
    """The Service made a NodePort (as a cluster without an Ingress exposes it): the
    node's address and the port, where the host reaches it."""
    path = f"/api/v1/namespaces/{namespace}/services/{service}"
    patch = {"spec": {"type": "NodePort"}}
    status, _, body = cluster.raw("PATCH", path, patch, "application/merge-patch+json")
    assert status == 200, body
    (port,) = [p["nodePort"] for p in body["spec"]["ports"]]
    (node,) = cluster.rest.get("/api/v1/nodes")["items"]
    addresses = node["status"]["addresses"]
    return next(a["address"] for a in addresses if a["type"] == "InternalIP"), port
