"""pytest fixtures: ``ecosystem``, the real control plane with the real JobSet controller and
Kueue controller manager (``addons.py``), started once per session; ``node_ecosystem``,
the same controllers against the real node's control plane (``tests/controlplane/
fixtures.py``), started for the tests of one module and uninstalled after them (the
other tests on that node must not meet Kueue's webhooks nor a served JobSet API);
``multikueue`` and ``multikueue_node``, a Kueue MultiKueue manager and its workers
(``multikueue.py``), started for the tests of one module.

The API double serves neither JobSet nor Kueue (their behaviour is their controllers'),
so the tests of the JobSet runtime run here only; tests/controlplane/DIFFERENCES.md says
so. Every object a test made (JobSets, Kueue's queues and flavors, the batch objects)
is removed before the next. Registered by ``tests/conftest.py`` through
``pytest_plugins``. If the controllers cannot start, the tests fail with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import requests

from tests.controlplane.harness import RealCluster, wait_for

if TYPE_CHECKING:
    from .addons import Ecosystem as Controllers
    from .multikueue import MultiKueue

# Kueue's and JobSet's objects a test may make, cluster-scoped ones with namespace None;
# removed in this order (a queue before what it names).
KUEUE_GROUP = "/apis/kueue.x-k8s.io/v1beta2"
KUEUE_VERSION = "kueue.x-k8s.io/v1beta2"
MULTIKUEUE_NAMESPACES = ("default", "ml")  # those with a LocalQueue on every cluster
WIPED = (
    ("/apis/jobset.x-k8s.io/v1alpha2", "jobsets", True),
    (KUEUE_GROUP, "localqueues", True),
    (KUEUE_GROUP, "clusterqueues", False),
    (KUEUE_GROUP, "resourceflavors", False),
    (KUEUE_GROUP, "workloadpriorityclasses", False),
    ("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
)


class Ecosystem:
    """The tests' view: the real cluster (``real``) with JobSet and Kueue beside it."""

    def __init__(
        self,
        real: RealCluster,
        kueue_log: Path | None = None,
        controllers: Controllers | None = None,
    ) -> None:
        self.real = real
        self.controllers = controllers  # the processes, where a test kills one
        self.rest = real.rest
        self.kubeconfig = real.kubeconfig
        self.kueue_log = kueue_log

    def kueue_said(self, *words: str) -> str | None:
        """The first line of Kueue's log that has all of `words`: what Kueue decided where
        it writes nothing to the API (a job it waits on, say)."""
        assert self.kueue_log is not None, "Kueue runs in this session, with a log"
        for line in self.kueue_log.read_text(errors="replace").splitlines():
            if all(word in line for word in words):
                return line
        return None

    def settle(self) -> None:
        self.real.settle()

    def objects(self, group: str, plural: str, namespace: str | None = None) -> list[Any]:
        where = f"/namespaces/{namespace}" if namespace else ""
        items: list[Any] = self.rest.get(f"{group}{where}/{plural}")["items"]
        return items

    def jobsets(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.objects("/apis/jobset.x-k8s.io/v1alpha2", "jobsets", namespace)

    def workloads(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.objects(KUEUE_GROUP, "workloads", namespace)

    def pods(self, jobset: str, namespace: str) -> list[dict[str, Any]]:
        return [
            p
            for p in self.real.objects("pods", namespace)
            if p["metadata"].get("labels", {}).get("jobset.sigs.k8s.io/jobset-name") == jobset
        ]

    def create(self, group: str, plural: str, body: dict[str, Any], namespace: str | None) -> Any:
        where = f"/namespaces/{namespace}" if namespace else ""
        return self.rest.create(f"{group}{where}/{plural}", body)

    def queue(self, name: str, namespace: str, quota: dict[str, str]) -> None:
        """A LocalQueue ``name`` in ``namespace`` of a ClusterQueue of the same name, whose
        one ResourceFlavor (no node labels: any node) has ``quota`` (resource: nominal)."""
        self.create(
            KUEUE_GROUP,
            "resourceflavors",
            {"apiVersion": KUEUE_VERSION, "kind": "ResourceFlavor", "metadata": {"name": name}},
            None,
        )
        resources = [{"name": r, "nominalQuota": q} for r, q in quota.items()]
        self.create(
            KUEUE_GROUP,
            "clusterqueues",
            {
                "apiVersion": KUEUE_VERSION,
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": list(quota),
                            "flavors": [{"name": name, "resources": resources}],
                        }
                    ],
                },
            },
            None,
        )
        self.real.ensure_namespace(namespace)
        self.local_queue(name, namespace, name)

    def local_queue(self, name: str, namespace: str, cluster_queue: str) -> None:
        """A LocalQueue ``name`` in ``namespace``, of the ClusterQueue ``cluster_queue``."""
        self.create(
            KUEUE_GROUP,
            "localqueues",
            {
                "apiVersion": KUEUE_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"clusterQueue": cluster_queue},
            },
            namespace,
        )

    def served(self) -> bool:
        try:
            for group, plural, _ in WIPED:
                self.objects(group, plural)
        except requests.HTTPError:
            return False
        return True

    def wipe(self) -> None:
        for group, plural, namespaced in WIPED:
            for obj in self.objects(group, plural):
                meta = obj["metadata"]
                if meta["name"].startswith("system-"):
                    continue  # the server's own priority classes
                where = f"/namespaces/{meta['namespace']}" if namespaced else ""
                path = f"{group}{where}/{plural}/{meta['name']}"
                self.real._ignore_missing(
                    lambda p=path: self.rest.delete(p, {"propagationPolicy": "Foreground"})
                )
            wait_for(
                f"for the {plural} of the last test to go",
                lambda g=group, p=plural: (
                    not [
                        o
                        for o in self.objects(g, p)
                        if not o["metadata"]["name"].startswith("system-")
                    ]
                ),
                timeout=120,
            )
        self.real.wipe()
        self.real.clear_log()


@pytest.fixture(scope="session")
def ecosystem_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ecosystem]:
    from tests.controlplane.launcher import ControlPlane

    from .addons import Ecosystem as Controllers

    directory = tmp_path_factory.mktemp("ecosystem")
    with (
        ControlPlane(directory / "plane") as plane,
        RealCluster(plane, directory / "kubeconfig") as real,
        Controllers(plane, directory / "controllers") as controllers,
    ):
        eco = Ecosystem(real, controllers.kueue.log, controllers)
        # A CRD just established may answer 429 (its storage initializing) for a while.
        wait_for("Kueue's and JobSet's resources to be served", eco.served, timeout=120)
        yield eco


@pytest.fixture
def ecosystem(ecosystem_session: Ecosystem, tmp_path: Path) -> Ecosystem:
    ecosystem_session.wipe()
    return ecosystem_session


@pytest.fixture(scope="module")
def node_ecosystem_module(
    real_node: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ecosystem]:
    from .addons import Ecosystem as Controllers

    controllers = Controllers(real_node.plane, tmp_path_factory.mktemp("node-ecosystem"))
    controllers.start()
    try:
        eco = Ecosystem(real_node)
        wait_for("Kueue's and JobSet's resources to be served", eco.served, timeout=120)
        yield eco
        eco.wipe()  # while the controllers run: they clear their objects' finalizers
    finally:
        controllers.uninstall()


@pytest.fixture
def node_ecosystem(node_ecosystem_module: Ecosystem) -> Ecosystem:
    """JobSet and Kueue on the real node, every object of the last test removed."""
    node_ecosystem_module.wipe()
    return node_ecosystem_module


@pytest.fixture(scope="module")
def multikueue_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiKueue]:
    """A MultiKueue manager and two workers (``multikueue.py``): three control planes
    with their controllers, too heavy for two cores to keep beside the rest of the
    suite, so started once for the tests of one module and stopped after them."""
    from .multikueue import MultiKueue

    with MultiKueue(tmp_path_factory.mktemp("multikueue"), namespaces=MULTIKUEUE_NAMESPACES) as mk:
        yield mk


@pytest.fixture(scope="module")
def multikueue_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiKueue]:
    """A MultiKueue manager and one worker whose node is real (kubelet, containerd, ...,
    the training image imported, not the project's: no CronJob runs there): where a
    dispatched job really trains."""
    from tests.controlplane.rootfs import training_archive

    from .multikueue import MultiKueue

    with MultiKueue(
        tmp_path_factory.mktemp("multikueue-node"),
        ("manager", "worker-a"),
        real_nodes=("worker-a",),
        images=(training_archive(),),
    ) as mk:
        yield mk


@pytest.fixture
def multikueue(multikueue_clusters: MultiKueue) -> MultiKueue:
    """The clusters with every object of the last test removed, the MultiKueue setup kept."""
    multikueue_clusters.wipe()
    return multikueue_clusters


REAL_ONLY = frozenset({"ecosystem", "multikueue"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--backend double`` (the fast path) deselects the tests on JobSet and Kueue, which
    run on the real control plane only; CI runs both backends, so runs them."""
    if config.getoption("--backend") != "double":
        return
    keep = [i for i in items if not REAL_ONLY & set(getattr(i, "fixturenames", ()))]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep
