"""A write's warnings: the `Warning` headers of its response (`299 - "text"`) are kept
with its result, as the API server wrote them (a stub server: PodSecurity's warning on
the real control plane is in tests/test_podsecurity_warning.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from mxgitops import cluster
from mxgitops.objects import Create, Delete, Kind, ObjectRef
from tests.kubeapi.harness import stub_api

PODSECURITY = (
    'would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false '
    '(container "mxnet" must set securityContext.allowPrivilegeEscalation=false)'
)


class _Warning(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"kind": "ConfigMap", "metadata": {"name": "a"}}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        quoted = PODSECURITY.replace("\\", "\\\\").replace('"', '\\"')
        self.send_header("Warning", f'299 - "{quoted}"')
        self.send_header("Warning", '299 - "one, of two", 299 - "two"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_DELETE(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def warning(tmp_path: Path) -> Iterator[Path]:
    with stub_api(_Warning, tmp_path / "kubeconfig") as kubeconfig:
        yield kubeconfig


def test_a_writes_warnings_are_kept_with_its_result(warning: Path) -> None:
    kube = cluster.connect(kubeconfig=warning)
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ml"}}
    created, deleted = kube.write([Create(obj), Delete(ObjectRef(Kind.CONFIG_MAP, "ml", "b"))])
    assert created.ok and created.warnings == (PODSECURITY, "one, of two", "two")
    assert deleted.ok and deleted.warnings == ()
