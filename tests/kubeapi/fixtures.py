"""pytest fixtures: ``kubeapi`` runs each test that uses it on both backends.

* ``kubeapi[double]``: a fresh API double per test (``KubeAPI``): fast, with
  fault injection and explicit job-controller, kubelet and clock steps.
* ``kubeapi[real]``: the real control plane of ``tests/controlplane`` (etcd,
  kube-apiserver, kube-controller-manager, kube-scheduler and a fake kubelet),
  started once per session; every object a test made is removed before the next.

A test that needs what only the double can do (its clock, its internals, faults
the proxy cannot inject) says so with ``@pytest.mark.double_only("why")`` and is
generated for the double alone: no skip hides it on the real backend.
``--backend double|real|both`` (or ``MXGITOPS_TEST_BACKEND``) narrows a run; the
default, and what CI runs, is both. If the real control plane cannot start, its
tests fail with the reason: they never skip.

Registered by ``tests/conftest.py`` through ``pytest_plugins``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .harness import KubeAPI

BACKENDS = ("double", "real")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=(*BACKENDS, "both"),
        default=os.environ.get("MXGITOPS_TEST_BACKEND", "both"),
        help="which Kubernetes API the end-to-end tests run against (default: both)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "double_only(reason): needs what only the API double can do; says why"
    )
    backend = config.getoption("--backend")
    if os.environ.get("CI") == "true" and backend != "both":
        raise pytest.UsageError(f"CI runs the tests on both backends, not --backend {backend}")
    if backend != "double":
        # Build (or find cached) the control plane before any test runs, and put its
        # kubectl, of the same release as the server, first on PATH for every test.
        from tests.builds.servers import build_now
        from tests.controlplane.build import ensure_built

        def put_kubectl_first() -> None:
            os.environ["PATH"] = f"{ensure_built()}{os.pathsep}{os.environ.get('PATH', '')}"

        build_now(put_kubectl_first)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kubeapi" not in metafunc.fixturenames:
        return
    backends = BACKENDS
    marker = metafunc.definition.get_closest_marker("double_only")
    if marker is not None:
        if not marker.args:
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: double_only needs a reason")
        backends = ("double",)
    metafunc.parametrize("kubeapi", backends, indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--backend`` narrows by deselecting the other backend's tests, never skipping."""
    chosen = config.getoption("--backend")
    if chosen == "both":
        return
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("kubeapi") if callspec is not None else None
        (drop if backend not in (None, chosen) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


REAL_CLUSTER = pytest.StashKey[Any]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test on the real control plane shows what failed on its fault proxy's
    side: a client's error alone (say, a connection closed) does not tell why."""
    outcome = yield
    report = outcome.get_result()
    real = item.stash.get(REAL_CLUSTER, None)
    if real is not None and report.when == "call" and report.failed:
        problems = real.proxy_problems()
        report.sections.append(("fault proxy", "\n".join(problems) or "no problem on its side"))


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The real control plane for the whole session, with its fake node."""
    from tests.controlplane.harness import RealCluster
    from tests.controlplane.launcher import ControlPlane

    directory = tmp_path_factory.mktemp("controlplane")
    with ControlPlane(directory) as plane, RealCluster(plane, directory / "kubeconfig") as real:
        yield real


@pytest.fixture
def kubeapi(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "real":
        real = request.getfixturevalue("control_plane")
        real.wipe()
        real.clear_log()
        real.proxy_problems()  # an earlier test's
        request.node.stash[REAL_CLUSTER] = real
        yield real
        return
    api = KubeAPI(tmp_path / "kubeconfig")
    try:
        yield api
    finally:
        api.stop()
