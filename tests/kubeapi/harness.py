"""``KubeAPI``: start, drive and inspect one API double (fixture and CLI share it)."""

from __future__ import annotations

import contextlib
import copy
import json
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from . import schema
from .faults import Faults, RequestLog
from .resources import resource
from .server import KubeAPIServer

CONTEXT = "kubeapi"


def write_kubeconfig(path: Path, url: str) -> Path:
    """A kubeconfig with one context ``kubeapi`` (plain http, dummy token)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": url}}],
        "users": [{"name": CONTEXT, "user": {"token": "kubeapi-double"}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": "default"},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config))
    return path


class StubHandler(BaseHTTPRequestHandler):
    """Base of a one-off server's handler (see :func:`stub_api`): JSON answers, no log."""

    def answer(self, code: int, payload: Any, headers: Sequence[tuple[str, str]] = ()) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent."""


@contextlib.contextmanager
def stub_api(handler: type[BaseHTTPRequestHandler], kubeconfig: Path) -> Iterator[Path]:
    """A one-off HTTP server of ``handler`` on 127.0.0.1 and a kubeconfig naming it, for
    answers the double does not give (warnings, refusals); stopped afterwards."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield write_kubeconfig(kubeconfig, f"http://{host!s}:{port}")
    finally:
        server.shutdown()
        server.server_close()


class KubeAPI:
    """A running API double on 127.0.0.1.

    Attributes: ``url``, ``kubeconfig`` (path), ``server`` (the
    :class:`~.server.KubeAPIServer`, for anything not wrapped here).
    """

    backend = "double"

    def __init__(
        self,
        kubeconfig: Path,
        port: int = 0,
        seed: int | None = 0,
        request_log: Path | None = None,
        faults: str = "",
        fault_seed: int = 0,
    ) -> None:
        schema.warm_up()
        self.server = KubeAPIServer(
            ("127.0.0.1", port),
            seed=seed,
            log=RequestLog(request_log),
            faults=Faults(faults, fault_seed),
        )
        self.url = self.server.url
        self.kubeconfig = write_kubeconfig(kubeconfig, self.url)
        self._thread = threading.Thread(
            target=self.server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="kubeapi",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        self.server.stop()
        self._thread.join(timeout=5)

    def __enter__(self) -> KubeAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request log -----------------------------------------------------------
    @property
    def request_log(self) -> list[dict[str, Any]]:
        """Requests so far: dicts with method, path, query, verb, resource, status,
        fault, dropped (control-plane calls are never logged)."""
        return self.server.log.snapshot()

    def clear_log(self) -> None:
        self.server.log.clear()

    # -- faults ----------------------------------------------------------------
    def faults(self, spec: str = "", seed: int = 0, retry_after: int = 1) -> None:
        """Replace the fault rules (see :mod:`.faults` for the syntax); "" = none."""
        self.server.faults.configure(spec, seed, retry_after)

    # -- store access ----------------------------------------------------------
    def objects(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Deep copies of the stored objects of ``kind`` (plural like "jobs" or a Kind)."""
        return copy.deepcopy(self.server.store.objects(resource(kind), namespace))

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        with self.server.store.lock:
            obj = self.server.store.get(resource(kind), namespace, name)
            return copy.deepcopy(obj)

    def create(self, body: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
        """Create an object directly (same validation and defaults as over HTTP)."""
        obj, _ = self.server.rest.create(
            resource(body["kind"]), namespace, copy.deepcopy(body), "Strict"
        )
        return copy.deepcopy(obj)

    def create_strictly(self, body: dict[str, Any], namespace: str) -> None:
        """A dry-run create with Strict field validation: is ``body`` valid?"""
        self.server.rest.create(resource(body["kind"]), namespace, body, "Strict", True)

    @property
    def resource_version(self) -> int:
        return self.server.store.rv

    def compact(self) -> None:
        """Drop the watch history: watches from older resourceVersions get 410 Expired."""
        self.server.store.compact()

    # -- control plane ---------------------------------------------------------
    def run_job_controller(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """One job-controller sync of every Job; returns the pods it created."""
        return copy.deepcopy(self.server.control.run_job_controller(namespace))

    def kubelet(self, pod: str | None = None, **kwargs: Any) -> list[dict[str, Any]]:
        """See :meth:`.controlplane.ControlPlane.kubelet`."""
        return copy.deepcopy(self.server.control.kubelet(pod, **kwargs))

    def kubelet_jobs(
        self, jobs: Sequence[str], *, namespace: str = "default", **step: Any
    ) -> list[dict[str, Any]]:
        """See :meth:`.controlplane.ControlPlane.kubelet_jobs`."""
        return copy.deepcopy(self.server.control.kubelet_jobs(jobs, namespace=namespace, **step))

    def evict(self, pod: str, namespace: str, **kwargs: Any) -> dict[str, Any]:
        """See :meth:`.controlplane.ControlPlane.evict`."""
        return copy.deepcopy(self.server.control.evict(pod, namespace, **kwargs))

    def container_log(self, *, job: str, namespace: str, text: str) -> None:
        """What every pod of the batch Job ``job`` serves as its log (double only)."""
        self.server.pod_logs.set(namespace, job, text)

    def append_container_log(self, *, job: str, namespace: str, text: str) -> None:
        """Lines every pod of the batch Job ``job`` logs next, stamped now (double only)."""
        self.server.pod_logs.append(namespace, job, text)

    def settle(self, namespace: str | None = None) -> None:
        """Nothing to wait for: the double's controllers act only when stepped."""

    def advance_clock(self, seconds: float) -> None:
        self.server.control.advance_clock(seconds)
