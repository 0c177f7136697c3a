"""Helpers for tests that talk to the double through the official Python client."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kubernetes import client, config

from .harness import KubeAPI


@dataclass
class Clients:
    api: client.ApiClient
    core: client.CoreV1Api
    batch: client.BatchV1Api
    coordination: client.CoordinationV1Api


def clients_for(kubeapi: KubeAPI) -> Clients:
    """Official-client APIs configured from the double's kubeconfig (real HTTP)."""
    api = config.new_client_from_config(config_file=str(kubeapi.kubeconfig))  # type: ignore[no-untyped-call]
    return Clients(
        api, client.CoreV1Api(api), client.BatchV1Api(api), client.CoordinationV1Api(api)
    )


def error_body(exc: client.ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body or "{}")
    return body


def job_manifest(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A Job as mxgitops renders one: restartPolicy Never + podFailurePolicy on ``mxnet``."""
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels or {"app": "mx"}},
        "spec": {
            "backoffLimit": 0,
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "FailJob",
                        "onExitCodes": {
                            "containerName": "mxnet",
                            "operator": "In",
                            "values": list(range(1, 128)),
                        },
                    }
                ]
            },
            "template": {
                "metadata": {"labels": labels or {"app": "mx"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "mxnet", "image": "mxnet/python:1.9.1"}],
                },
            },
        },
    }
    body["spec"].update(spec)
    return body


def raw(
    kubeapi: KubeAPI,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
) -> tuple[int, dict[str, str], Any]:
    """One plain HTTP request (no client-side processing): (status, headers, JSON body)."""
    if kubeapi.backend == "real":  # TLS and a client certificate: the harness knows them
        return kubeapi.raw(method, path, body, content_type)  # type: ignore[attr-defined, no-any-return]
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        kubeapi.url + path, data=data, method=method, headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())
