"""``RealCluster``: the real control plane behind the API double's test interface.

A test written against ``tests.kubeapi.harness.KubeAPI`` (``objects``, ``get``,
``create``, ``request_log``, ``clear_log``, ``run_job_controller``, ``kubelet``,
``kubelet_jobs``) runs unchanged here. Where the double acts when stepped, the real
controllers act on their own; the harness then waits until what the test asked for
has happened (every Job's pods exist, the job controller has counted every finished
pod), by reading the API, with a deadline, never by sleeping a fixed time.

The request log is the API server's audit log, read from the offset of the last
``clear_log``, limited to the identity mxgitops runs as in tests (``CLIENT``), in
the double's entry shape (or as any service account, for syncs run with a
ServiceAccount's token). ``faults(spec)`` puts the fault proxy (``proxy.py``)
between mxgitops and the server for the rest of the test: the kubeconfig then
names the proxy, and the request log continues with the proxy's entries, which
include the requests a fault kept from the server.

``keeping(namespaces)`` sets namespaces aside for an installation that outlives one
test (the CronJob's, whose scheduled runs come minutes apart): ``wipe`` and ``settle``
leave their objects alone, and the request log leaves out their service accounts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import requests

from tests.kubeapi.faults import RequestLog
from tests.kubeapi.resources import Resource, resource

from .controllers import WAIT_TIMEOUT, ControllerSteps, wait_for
from .kubelet import FakeKubelet
from .launcher import CLIENT, ControlPlane
from .proxy import FaultProxy
from .rest import Rest

SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})
# Namespaces the tests use, made once: unlike the double, the real server refuses
# objects in a namespace that does not exist (NamespaceLifecycle admission).
TEST_NAMESPACES = ("default", "ml", "ml-training", "other", "from-flag", "mxgitops", "strict")
# Objects the server makes for itself, which no test made and no test should see.
SYSTEM_OBJECTS = frozenset({("services", "default", "kubernetes")})
SYSTEM_NAMES = frozenset({"kube-root-ca.crt"})
WIPED = ("jobs", "services", "pods", "configmaps", "leases")
# mxgitops' own Events go too (a test reading what it said must not read what the last
# test made it say); the controllers' keep coming while objects go, and are left.
EVENTS = "events.events.k8s.io"
MXGITOPS_EVENTS = "mxgitops.io/sync"
__all__ = ["RealCluster", "wait_for"]  # wait_for: every real-parts test waits with it
METHODS = {
    "get": "GET",
    "list": "GET",
    "watch": "GET",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
    "deletecollection": "DELETE",
}


def collection(res: Resource, namespace: str | None) -> str:
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"{res.api_prefix}{where}/{res.plural}"


def _audit_entry(event: dict[str, Any]) -> dict[str, Any]:
    uri = urlsplit(event["requestURI"])
    code = (event.get("responseStatus") or {}).get("code", 0)
    return {
        "method": METHODS.get(event["verb"], event["verb"].upper()),
        "path": uri.path,
        "query": dict(parse_qsl(uri.query)),
        "verb": event["verb"],
        "resource": (event.get("objectRef") or {}).get("resource", ""),
        "status": code,
        "fault": None,
        "dropped": False,
        "user": event["user"]["username"],
        # whom the request acted as (tenancy's Impersonate-User), if anyone
        "impersonated": (event.get("impersonatedUser") or {}).get("username"),
    }


def _is_client(user: str) -> bool:
    """mxgitops' requests: as the tests' client identity, or as a service account
    (a sync run with a ServiceAccount's token); not the harness's, the controllers'
    or the fake kubelet's."""
    return user == CLIENT or user.startswith("system:serviceaccount:")


class RealCluster(ControllerSteps):
    """The tests' view of one running :class:`ControlPlane` (see the module docstring)."""

    backend = "real"

    def __init__(self, plane: ControlPlane, kubeconfig: Path, fake_node: bool = True) -> None:
        assert plane.pki is not None and plane.admin is not None and plane.audit_log
        self.plane = plane
        self.url = plane.url
        self.kubeconfig = plane.kubeconfig(kubeconfig)
        self.audit_log = plane.audit_log
        self.rest = Rest(plane.url, plane.pki.ca, plane.admin.cert, plane.admin.key)
        # Without the fake kubelet, a real node (node.py) runs the pods: kubelet()
        # and container_log() are then refused, what the containers do is real.
        self.node: FakeKubelet | None = None
        if fake_node:
            self.node = FakeKubelet(self.rest, plane.pki.serving("kubelet")).start()
        self._namespaces: set[str] = set()
        self._handed_out: set[str] = set()  # pods run_job_controller returned already
        self._kept: frozenset[str] = frozenset()  # namespaces set aside (keeping)
        for namespace in TEST_NAMESPACES:
            self.ensure_namespace(namespace)
        self._log_offset = 0
        self._audit_until: int | None = None  # where the proxy took over the request log
        self._proxy_log = RequestLog()
        self._proxy: FaultProxy | None = None
        self.clear_log()

    def stop(self) -> None:
        if self._proxy is not None:
            self._proxy.stop()
        if self.node is not None:
            self.node.stop()

    # -- faults ------------------------------------------------------------------
    def faults(self, spec: str = "", seed: int = 0, retry_after: int = 1) -> None:
        """Inject faults between mxgitops and the server (see ``tests/kubeapi/faults.py``)."""
        if self._proxy is None:
            assert self.plane.pki is not None and self.plane.client is not None
            self._proxy = FaultProxy(
                self.url,
                str(self.plane.pki.ca),
                self.plane.client,
                self.plane.pki.serving("proxy"),
                self._proxy_log,
            )
        if self._audit_until is None:
            self._audit_until = self._audit_size()
            self._proxy_log.clear()
            self.plane.kubeconfig(self.kubeconfig, server=self._proxy.url)
        self._proxy.faults.configure(spec, seed, retry_after)

    @property
    def proxy_url(self) -> str:
        """The fault proxy's URL (start it with :meth:`faults`)."""
        assert self._proxy is not None, "call faults() first"
        return self._proxy.url

    def proxy_problems(self) -> list[str]:
        """What failed on the fault proxy's side since last asked (a handshake, a
        handler's exception): a failing test's report shows them (kubeapi/fixtures.py)."""
        if self._proxy is None:
            return []
        taken = list(self._proxy.problems)
        del self._proxy.problems[: len(taken)]
        return taken

    def direct(self) -> None:
        """No proxy: mxgitops talks to the API server itself again."""
        if self._proxy is not None:
            self._proxy.faults.configure("")
        self.plane.kubeconfig(self.kubeconfig)
        self._audit_until = None

    def __enter__(self) -> RealCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- namespaces --------------------------------------------------------------
    def ensure_namespace(self, namespace: str) -> None:
        """Create ``namespace`` if missing and wait for its default service account,
        without which no pod can be admitted (ServiceAccount admission)."""
        if namespace in self._namespaces:
            return
        if self.rest.get_or_none(f"/api/v1/namespaces/{namespace}") is None:
            self.rest.create(
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            )
        wait_for(
            f"for the default service account of {namespace}",
            lambda: (
                self._alive()
                and self.rest.get_or_none(f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
            ),
        )
        self._namespaces.add(namespace)

    def _alive(self) -> bool:
        """True, or the control plane's exit and log tail (a controller manager that
        refused its flags makes no service account: say so, not a timeout)."""
        self.plane.check_alive()
        return True

    @contextmanager
    def keeping(self, namespaces: frozenset[str]) -> Iterator[None]:
        """Leave ``namespaces`` alone while in the block (see the module docstring), with
        those an enclosing block keeps: the CronJob's installation keeps its namespaces
        for the whole session, around other tests' blocks."""
        before = self._kept
        self._kept = before | namespaces
        try:
            yield
        finally:
            self._kept = before

    def _not_kept(self, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [o for o in objects if o["metadata"].get("namespace") not in self._kept]

    def _is_kept_account(self, user: str) -> bool:
        # system:serviceaccount:<namespace>:<name>
        return user.startswith("system:serviceaccount:") and user.split(":")[2] in self._kept

    # -- request log -------------------------------------------------------------
    @property
    def request_log(self) -> list[dict[str, Any]]:
        """What mxgitops asked since the last :meth:`clear_log`: the audit log, then
        what the proxy saw once :meth:`faults` put it in between."""
        with self.audit_log.open("rb") as log:
            log.seek(max(0, self._log_offset - 1))
            # The offsets are the file's sizes when taken, which may fall inside a line
            # the API server was writing: that line is the older request's.
            starts_a_line = self._log_offset == 0 or log.read(1) == b"\n"
            data = (
                log.read()
                if self._audit_until is None
                else log.read(max(0, self._audit_until - self._log_offset))
            )
        lines = data.split(b"\n")[:-1]  # the last is still being written (or empty)
        events = [json.loads(line) for line in lines[0 if starts_a_line else 1 :] if line]
        audited = [
            _audit_entry(event)
            for event in events
            if _is_client(event["user"]["username"])
            and not self._is_kept_account(event["user"]["username"])
            and event["stage"] == "ResponseComplete"
        ]
        return audited + (self._proxy_log.snapshot() if self._audit_until is not None else [])

    def clear_log(self) -> None:
        self._log_offset = self._audit_size()
        if self._audit_until is not None:
            self._audit_until = self._log_offset
        self._proxy_log.clear()

    def _audit_size(self) -> int:
        return self.audit_log.stat().st_size if self.audit_log.exists() else 0

    # -- objects -----------------------------------------------------------------
    def objects(
        self, kind: str, namespace: str | None = None, field_selector: str | None = None
    ) -> list[dict[str, Any]]:
        """The test-visible objects of ``kind``: none in kube-* namespaces, none the
        server made for itself (the ``kubernetes`` Service, ``kube-root-ca.crt``)."""
        res = resource(kind)
        query = {"fieldSelector": field_selector} if field_selector else {}
        items: list[dict[str, Any]] = self.rest.get(collection(res, namespace), **query)["items"]
        visible = []
        for obj in items:
            meta = obj["metadata"]
            if meta.get("namespace") in SYSTEM_NAMESPACES or meta["name"] in SYSTEM_NAMES:
                continue
            if (res.plural, meta.get("namespace"), meta["name"]) in SYSTEM_OBJECTS:
                continue
            obj.setdefault("apiVersion", res.group_version)
            obj.setdefault("kind", res.kind)
            visible.append(obj)
        return visible

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        res = resource(kind)
        found: dict[str, Any] | None = self.rest.get_or_none(f"{collection(res, namespace)}/{name}")
        return found

    def create(self, body: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
        """Create as admin; the namespace is made first if missing, as the double needs none."""
        self.ensure_namespace(namespace)
        created: dict[str, Any] = self.rest.create(
            collection(resource(body["kind"]), namespace), body
        )
        return created

    def create_strictly(self, body: dict[str, Any], namespace: str) -> None:
        """A server-side dry-run create with strict field validation: is ``body`` valid?"""
        self.rest.create(
            collection(resource(body["kind"]), namespace),
            body,
            dryRun="All",
            fieldValidation="Strict",
        )

    def raw(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, dict[str, str], Any]:
        """One plain HTTP request as admin: (status, headers, JSON body, or the text
        of a body that is not JSON, such as a log)."""
        response = self.rest.session.request(
            method,
            self.url + path,
            data=json.dumps(body) if body is not None else None,
            headers={"Content-Type": content_type, "Accept": "application/json"},
            timeout=30,
        )
        is_json = response.headers.get("Content-Type", "").startswith("application/json")
        return (
            response.status_code,
            dict(response.headers),
            (response.json() if is_json else response.text),
        )

    def wipe(self) -> None:
        """Remove every object a test may have made, in every non-system namespace
        not kept (``keeping``), and take the fault proxy out.

        Each namespace's objects of a kind go in one request (a delete of the
        collection), Jobs first: once a Job is gone the job controller creates no pod
        for it, and every pod left (or made by a controller that had not yet seen its
        Job go) is deleted again, its job-tracking finalizer removed, until none is
        left. Then the controllers settle."""
        self.direct()
        self._handed_out.clear()
        for event in self._not_kept(
            self.objects(EVENTS, field_selector=f"reportingController={MXGITOPS_EVENTS}")
        ):
            self._ignore_missing(lambda e=event: self.rest.delete(self._path(EVENTS, e)))
        deadline = time.monotonic() + WAIT_TIMEOUT
        while True:
            listed = {plural: self._not_kept(self.objects(plural)) for plural in WIPED}
            left = {plural: objs for plural, objs in listed.items() if objs}
            if not left:
                break
            if time.monotonic() > deadline:
                names = {p: [o["metadata"]["name"] for o in objs] for p, objs in left.items()}
                raise TimeoutError(f"real control plane: the last test's objects stay: {names}")
            for plural, objs in left.items():
                self._remove_all(plural, objs)
            time.sleep(0.05)  # the garbage collector and the job controller act on their own
        self.settle()

    def _remove_all(self, plural: str, objs: list[dict[str, Any]]) -> None:
        """Delete ``objs`` of ``plural``: their namespaces' collections at once (but the
        server's own objects), a pod's finalizers first."""
        res = resource(plural)
        for obj in objs:
            if plural == "pods" and obj["metadata"].get("finalizers"):
                self._ignore_missing(  # the job controller's tracking
                    lambda o=obj: self.rest.patch(
                        self._path(plural, o), {"metadata": {"finalizers": None}}
                    )
                )
        for namespace in sorted({o["metadata"]["namespace"] for o in objs}):
            spared = sorted(SYSTEM_NAMES) + [
                name for kind, ns, name in SYSTEM_OBJECTS if kind == plural and ns == namespace
            ]
            self.rest.delete(
                collection(res, namespace),
                {"gracePeriodSeconds": 0, "propagationPolicy": "Background"},
                fieldSelector=",".join(f"metadata.name!={name}" for name in spared),
            )

    @staticmethod
    def _path(plural: str, obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        return f"{collection(resource(plural), meta['namespace'])}/{meta['name']}"

    @staticmethod
    def _ignore_missing(call: Callable[[], Any]) -> None:
        try:
            call()
        except requests.HTTPError as err:
            if err.response is None or err.response.status_code not in (404, 409):
                raise
