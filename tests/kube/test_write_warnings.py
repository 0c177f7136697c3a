"""A write's warnings: the `Warning` headers of its response (`299 - "text"`) are kept
with its result, as the API server wrote them (a stub server: PodSecurity's warning on
the real control plane is in tests/e2e/test_podsecurity_warning.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mxgitops.kube import cluster
from mxgitops.objects import Create, Delete, Kind, ObjectRef
from tests.kubeapi.harness import StubHandler, stub_api

PODSECURITY = (
    'would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false '
    '(container "mxnet" must set securityContext.allowPrivilegeEscalation=false)'
)


class _Warning(StubHandler):
    def do_POST(self) -> None:
        quoted = PODSECURITY.replace("\\", "\\\\").replace('"', '\\"')
        warnings = [
            ("Warning", f'299 - "{quoted}"'),
            ("Warning", '299 - "one, of two", 299 - "two"'),
        ]
        self.answer(201, {"kind": "ConfigMap", "metadata": {"name": "a"}}, warnings)

    def do_DELETE(self) -> None:
        self.answer(200, {})


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
