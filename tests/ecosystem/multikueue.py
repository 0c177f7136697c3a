"""Several clusters at once: a Kueue MultiKueue manager and its workers.

Each cluster is a real control plane of its own (``tests/controlplane/launcher.py``: its
own etcd, kube-apiserver, controller manager and scheduler, on free loopback ports)
with the real JobSet and Kueue beside it (``addons.py``). The first cluster named is
the manager, the others its workers, set up as Kueue's task "Setup a MultiKueue
environment" describes:

- on each worker: the namespaces and LocalQueues the manager has, mirrored (a
  ResourceFlavor, a ClusterQueue with the worker's quota, a LocalQueue of it in every
  namespace), and an identity of its own for the manager's Kueue, bound to a
  ClusterRole with the rules of Kueue's ``create-multikueue-kubeconfig.sh`` (JobSets,
  batch Jobs and Workloads only);
- on the manager: one Secret per worker in ``kueue-system`` holding a kubeconfig for
  that identity (its certificates inline: MultiKueue refuses file paths), a
  ``MultiKueueCluster`` per worker, one ``MultiKueueConfig`` naming them all, the
  ``AdmissionCheck`` of controller ``kueue.x-k8s.io/multikueue``, and a ClusterQueue
  that uses it, with the workers' quota summed (Kueue's advice), and its LocalQueues.

The objects are those of the manual's example, ``cronjob/components/multikueue/``
(``manager-example.yaml``, ``worker-example.yaml``, ``worker-role.yaml``), applied with
the harness's namespaces for the example's ``team-a`` and its workers' names: the
tests run what a reader applies.

The manager's Kueue gets a ``multiKueue`` section: ``workerLostTimeout`` (Kueue's
default is 15 minutes; the tests wait for it) and a short ``gcInterval``. The manager
runs no node: its JobSets are only dispatched (``spec.managedBy``
``kueue.x-k8s.io/multikueue``, set by Kueue's webhook). The workers run the fake
kubelet, which moves pods when a test says so, or the real node of
``tests/controlplane/node.py`` (``real_nodes``), where pods run real containers.

``MultiKueue.kubeconfig(path)`` writes one kubeconfig with a context per cluster
(``manager``, ``worker-a``, ...), the manager's current.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.launcher import ControlPlane

from .addons import KUEUE_NAMESPACE
from .addons import Ecosystem as Controllers
from .fixtures import KUEUE_GROUP, Ecosystem

CLUSTERS = ("manager", "worker-a", "worker-b")
EXAMPLE = Path(__file__).resolve().parents[2] / "cronjob" / "components" / "multikueue"
EXAMPLE_NAMESPACE = "team-a"
ORIGIN = "mxgitops-manager"
# How long the manager keeps a job admitted on a worker it cannot reach before it puts
# the job back in its queue (Kueue's default: 15 minutes).
WORKER_LOST_TIMEOUT = "30s"
WORKER_USER = "multikueue"  # the example's worker-role.yaml binds this user


def example(name: str) -> dict[str, dict[str, Any]]:
    """The example file's objects by kind (the first of each)."""
    found: dict[str, dict[str, Any]] = {}
    for doc in yaml.safe_load_all((EXAMPLE / name).read_text()):
        if doc:
            found.setdefault(doc["kind"], doc)
    return found


MANAGER = example("manager-example.yaml")
WORKER = example("worker-example.yaml")
CLUSTER_QUEUE = MANAGER["ClusterQueue"]["metadata"]["name"]
LOCAL_QUEUE = MANAGER["LocalQueue"]["metadata"]["name"]
ADMISSION_CHECK = MANAGER["AdmissionCheck"]["metadata"]["name"]
RBAC = "/apis/rbac.authorization.k8s.io/v1"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2"


@dataclass
class Member:
    """One cluster of the set: its control plane, the tests' view of it, its controllers."""

    name: str
    plane: ControlPlane
    real: RealCluster
    controllers: Controllers

    @property
    def eco(self) -> Ecosystem:
        return Ecosystem(self.real, self.controllers.kueue.log)


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _create(member: Member, collection: str, body: dict[str, Any]) -> None:
    """Create as admin; once more if the connection broke before any answer (a kept-alive
    connection the server had closed: the request never reached it, which the audit
    log showed once). A conflict on that second try is the first one's object."""
    try:
        member.real.rest.create(collection, body)
    except requests.ConnectionError:
        try:
            member.real.rest.create(collection, body)
        except requests.HTTPError as err:
            if err.response is None or err.response.status_code != 409:
                raise


def _active(obj: dict[str, Any] | None) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)


class MultiKueue:
    """A manager and its workers (see the module docstring); use as a context manager."""

    def __init__(
        self,
        directory: Path,
        names: Sequence[str] = CLUSTERS,
        *,
        namespaces: Sequence[str] = ("default",),
        worker_lost_timeout: str = WORKER_LOST_TIMEOUT,
        quota: dict[str, str] | None = None,
        real_nodes: Sequence[str] = (),
        images: Sequence[Path] = (),
    ) -> None:
        if len(names) < 2:
            raise ValueError("MultiKueue needs a manager and at least one worker")
        self.directory = directory
        self.names = tuple(names)
        self.namespaces = tuple(namespaces)
        self.worker_lost_timeout = worker_lost_timeout
        # each worker's, by default the example's
        self.quota = quota or {
            r["name"]: str(r["nominalQuota"])
            for r in WORKER["ClusterQueue"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        }
        # Workers whose node is real (tests/controlplane/node.py, ``images`` imported):
        # their pods run real containers; the others' the fake kubelet moves.
        self.real_nodes = frozenset(real_nodes)
        self.images = tuple(images)
        self._stack = contextlib.ExitStack()
        self.members: dict[str, Member] = {}
        self.started_in = 0.0  # seconds, for the manual's figures

    @property
    def manager(self) -> Member:
        return self.members[self.names[0]]

    @property
    def workers(self) -> list[Member]:
        return [self.members[name] for name in self.names[1:]]

    # -- start ---------------------------------------------------------------------
    def start(self) -> MultiKueue:
        began = time.monotonic()
        try:
            self._start_members()
            self._set_up_manager()
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - began
        return self

    def _start_members(self) -> None:
        """Every member started at once, stage by stage: the control planes launched,
        then the real nodes started (their images imported meanwhile), then, each plane
        ready, its controllers launched, and then awaited; each stage runs from this
        thread: each process dies with the thread that started it (PR_SET_PDEATHSIG is
        a thread's), so none is started from a pool."""
        planes: dict[str, ControlPlane] = {}
        for name in self.names:
            if name not in self.real_nodes:
                plane = ControlPlane(self.directory / name / "plane")
                self._stack.callback(plane.stop)
                plane.launch()
                planes[name] = plane
        for name in self.names:
            if name in self.real_nodes:
                from tests.controlplane.node import real_node_cluster

                planes[name] = self._stack.enter_context(
                    real_node_cluster(self.directory / name, images=self.images)
                )
            else:
                planes[name].wait_started()
        for index, name in enumerate(self.names):
            self._launch_member(name, planes[name], manager=index == 0)
        for name in self.names:
            member = self.members[name]
            member.controllers.wait_started()
            wait_for(f"Kueue's and JobSet's resources on {name}", member.eco.served, timeout=120)
            if member is not self.manager:
                self._set_up_worker(member)

    def _launch_member(self, name: str, plane: ControlPlane, *, manager: bool) -> None:
        directory = self.directory / name
        # The manager runs no pods (its JobSets are dispatched, never run there), nor
        # does the fake kubelet on a real node.
        fake = not manager and name not in self.real_nodes
        real = RealCluster(plane, directory / "kubeconfig", fake_node=fake)
        try:
            extra = (
                {
                    "multiKueue": {
                        "gcInterval": "5s",
                        "origin": ORIGIN,
                        "workerLostTimeout": self.worker_lost_timeout,
                    }
                }
                if manager
                else {}
            )
            controllers = Controllers(plane, directory / "controllers", kueue_config=extra)
            self.members[name] = Member(name, plane, real, controllers)
            controllers.launch()
        except BaseException:
            if name not in self.members:
                real.stop()
            raise

    def _set_up_worker(self, worker: Member) -> None:
        """The example's worker-role.yaml and worker-example.yaml (its quota, or ours)."""
        for doc in yaml.safe_load_all((EXAMPLE / "worker-role.yaml").read_text()):
            plural = "clusterroles" if doc["kind"] == "ClusterRole" else "clusterrolebindings"
            _create(worker, f"{RBAC}/{plural}", doc)
        self._queues(worker, WORKER, self.quota)

    def _queues(
        self, member: Member, objects: dict[str, dict[str, Any]], quota: dict[str, str] | None
    ) -> None:
        """The example's flavor, ClusterQueue (with ``quota``, if given) and its LocalQueue
        in every namespace."""
        _create(member, f"{KUEUE_GROUP}/resourceflavors", objects["ResourceFlavor"])
        queue = copy.deepcopy(objects["ClusterQueue"])
        if quota is not None:
            (group,) = queue["spec"]["resourceGroups"]
            (flavor,) = group["flavors"]
            group["coveredResources"] = list(quota)
            flavor["resources"] = [{"name": r, "nominalQuota": q} for r, q in quota.items()]
        _create(member, f"{KUEUE_GROUP}/clusterqueues", queue)
        for namespace in self.namespaces:
            self.add_namespace(member, namespace)

    def add_namespace(self, member: Member, namespace: str) -> None:
        """The namespace and its LocalQueue on ``member`` (what a worker must mirror), if
        missing."""
        member.real.ensure_namespace(namespace)
        path = f"{KUEUE_GROUP}/namespaces/{namespace}/localqueues/{LOCAL_QUEUE}"
        if member.real.rest.get_or_none(path) is not None:
            return
        queue = copy.deepcopy(MANAGER["LocalQueue"])
        queue["metadata"]["namespace"] = namespace
        _create(member, f"{KUEUE_GROUP}/namespaces/{namespace}/localqueues", queue)

    def remove_local_queue(self, member: Member, namespace: str) -> None:
        path = f"{KUEUE_GROUP}/namespaces/{namespace}/localqueues/{LOCAL_QUEUE}"
        member.real.rest.delete(path)
        wait_for(f"{path} to go", lambda: member.real.rest.get_or_none(path) is None)

    def _set_up_manager(self) -> None:
        """The example's manager-example.yaml: a MultiKueueCluster (and its Secret) per
        worker, the MultiKueueConfig naming them, the AdmissionCheck, the ClusterQueue
        with the workers' quota summed, its LocalQueues; then until all are Active."""
        manager = self.manager
        for worker in self.workers:
            cluster = copy.deepcopy(MANAGER["MultiKueueCluster"])
            cluster["metadata"]["name"] = worker.name
            secret = f"{worker.name}-kubeconfig"
            cluster["spec"]["clusterSource"]["kubeConfig"]["location"] = secret
            _create(
                manager,
                f"/api/v1/namespaces/{KUEUE_NAMESPACE}/secrets",
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": secret, "namespace": KUEUE_NAMESPACE},
                    "stringData": {"kubeconfig": self._worker_kubeconfig(worker)},
                },
            )
            _create(manager, f"{KUEUE_GROUP}/multikueueclusters", cluster)
        config = copy.deepcopy(MANAGER["MultiKueueConfig"])
        config["spec"]["clusters"] = [w.name for w in self.workers]
        _create(manager, f"{KUEUE_GROUP}/multikueueconfigs", config)
        _create(manager, f"{KUEUE_GROUP}/admissionchecks", MANAGER["AdmissionCheck"])
        summed = {resource: self._summed(resource) for resource in self.quota}
        self._queues(manager, MANAGER, summed)
        self.wait_active()

    def _summed(self, resource: str) -> str:
        """The workers' quota of ``resource`` together (``8`` or ``32Gi`` a worker)."""
        quantity = self.quota[resource]
        digits = "".join(c for c in quantity if c.isdigit())
        return f"{int(digits) * len(self.workers)}{quantity[len(digits) :]}"

    def wait_active(self, timeout: float = 120) -> None:
        """Until the MultiKueueClusters, the AdmissionCheck and the ClusterQueue say Active
        (each worker connected)."""
        rest = self.manager.real.rest
        paths = [f"{KUEUE_GROUP}/multikueueclusters/{w.name}" for w in self.workers] + [
            f"{KUEUE_GROUP}/admissionchecks/{ADMISSION_CHECK}",
            f"{KUEUE_GROUP}/clusterqueues/{CLUSTER_QUEUE}",
        ]
        for path in paths:
            wait_for(f"{path} to be Active", lambda p=path: _active(rest.get_or_none(p)), timeout)

    def _worker_kubeconfig(self, worker: Member) -> str:
        """A kubeconfig for the manager's Kueue on ``worker``: everything inline."""
        pki = worker.plane.pki
        assert pki is not None
        pair = pki.client(WORKER_USER, WORKER_USER)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": worker.name,
                    "cluster": {
                        "server": worker.plane.url,
                        "certificate-authority-data": _b64(pki.ca),
                    },
                }
            ],
            "users": [
                {
                    "name": WORKER_USER,
                    "user": {
                        "client-certificate-data": _b64(pair.cert),
                        "client-key-data": _b64(pair.key),
                    },
                }
            ],
            "contexts": [
                {"name": worker.name, "context": {"cluster": worker.name, "user": WORKER_USER}}
            ],
            "current-context": worker.name,
        }
        return yaml.safe_dump(config)

    # -- use -----------------------------------------------------------------------
    def kubeconfig(self, path: Path) -> Path:
        """One kubeconfig with a context per cluster (the tests' mxgitops identity on
        each), the manager's current."""
        clusters, users, contexts = [], [], []
        for name, member in self.members.items():
            pki, client = member.plane.pki, member.plane.client
            assert pki is not None and client is not None
            clusters.append(
                {
                    "name": name,
                    "cluster": {"server": member.plane.url, "certificate-authority": str(pki.ca)},
                }
            )
            users.append(
                {
                    "name": name,
                    "user": {"client-certificate": str(client.cert), "client-key": str(client.key)},
                }
            )
            contexts.append(
                {"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}
            )
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": clusters,
            "users": users,
            "contexts": contexts,
            "current-context": self.names[0],
            "preferences": {},
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def wipe(self) -> None:
        """Remove what a test made, the MultiKueue setup kept: the manager's JobSets (the
        workers' copies and Workloads go with them), then each cluster's objects."""
        manager = self.manager
        for jobset in manager.eco.jobsets():
            meta = jobset["metadata"]
            path = f"{JOBSETS}/namespaces/{meta['namespace']}/jobsets/{meta['name']}"
            manager.real._ignore_missing(
                lambda p=path: manager.real.rest.delete(p, {"propagationPolicy": "Foreground"})
            )
        for member in self.members.values():
            for jobset in member.eco.jobsets():  # a lost worker's copies, left by the manager
                meta = jobset["metadata"]
                path = f"{JOBSETS}/namespaces/{meta['namespace']}/jobsets/{meta['name']}"
                member.real._ignore_missing(lambda p=path, m=member: m.real.rest.delete(p))
            wait_for(
                f"the JobSets and Workloads on {member.name} to go",
                lambda m=member: not m.eco.jobsets() and not m.eco.workloads(),
                timeout=120,
            )
            member.real.wipe()
            member.real.clear_log()

    # -- stop ----------------------------------------------------------------------
    def stop(self) -> None:
        for member in reversed(list(self.members.values())):
            for stop in (member.controllers.stop, member.real.stop):
                with contextlib.suppress(OSError, requests.RequestException):
                    stop()  # the rest stop all the same
        self.members.clear()
        self._stack.close()  # the control planes (and real nodes), last started first

    def __enter__(self) -> MultiKueue:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
