"""Run the real JobSet controller and Kueue controller manager against a real control plane.

Both run out of cluster, as processes beside the control plane of ``tests/controlplane``
(``Ecosystem(plane, directory).start()``), each with a client certificate of its own:

- their CRDs are applied from the module's own ``config/components/crd/bases`` in Go's
  module cache, with the conversion webhooks their kustomizations enable pointed at the
  manager (``url: https://127.0.0.1:PORT/convert`` and the test CA as ``caBundle``);
- their admission webhooks are served on loopback with a serving certificate of the test
  CA: the module's ``config/components/webhook/manifests.yaml`` is written with each
  webhook's ``service`` replaced by its ``url`` and ``caBundle``, the selectors their
  kustomize patches add kept; the managers start with their internal cert management off
  and the serving cert directory given, metrics and leader election off;
- Kueue manages queued JobSets (and batch Jobs, its default, whose webhook also judges
  a JobSet's child Jobs) with ``manageJobsWithoutQueueName: false``: an unqueued JobSet
  or batch Job runs as if Kueue were not there.

The pods are those of the plane's node: the fake kubelet's (``tests/controlplane/kubelet.py``)
or the real node's (``tests/controlplane/node.py``, where they run real containers); the
child Jobs get them from kube-controller-manager's job controller. Ready means each
webhook answers: a dry-run create that the manager's webhooks must admit.

``uninstall()`` takes everything ``start()`` put into the cluster out again (webhook
configurations, CRDs, Kueue's namespace): on a control plane other tests share after
these (the real node's), no webhook is left pointing at a stopped manager and no JobSet
API is left served.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from tests.controlplane.launcher import ControlPlane, die_with_parent, free_port, write_kubeconfig
from tests.controlplane.rest import Rest

from .build import JOBSET, KUEUE, Component, ensure_built, module_dir

START_TIMEOUT = 120.0
STOP_TIMEOUT = 5.0
KUEUE_NAMESPACE = "kueue-system"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
METRICS_CERTS = "/etc/kueue/metrics/certs"  # Kueue's, fixed


def _documents(path: Path) -> Iterator[dict[str, Any]]:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc:
            yield doc


def _json_patches(path: Path) -> list[dict[str, Any]]:
    """A kustomize JSON 6902 patch file (`- op: replace, path: /webhooks/1, value: ...`)."""
    loaded = yaml.safe_load(path.read_text())
    return loaded if isinstance(loaded, list) else []


def _strategic_webhooks(kustomization: Path) -> dict[str, dict[str, Any]]:
    """Inline strategic-merge patches of a webhook kustomization, by webhook name."""
    found: dict[str, dict[str, Any]] = {}
    for patch in yaml.safe_load(kustomization.read_text()).get("patches") or []:
        text = patch.get("patch")
        if not text:
            continue
        for webhook in (yaml.safe_load(text) or {}).get("webhooks") or []:
            found[webhook["name"]] = webhook
    return found


@dataclass
class Manager:
    """One controller manager: its binary, module, webhook port and process."""

    component: Component
    directory: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / f"{self.component.name}.log"

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            tail = self.log.read_text(errors="replace")[-4000:]
            raise RuntimeError(
                f"{self.component.name} exited with {self.process.returncode}:\n{tail}"
            )


class Ecosystem:
    """JobSet and Kueue running against ``plane``; use as a context manager."""

    def __init__(
        self, plane: ControlPlane, directory: Path, kueue_config: dict[str, Any] | None = None
    ) -> None:
        assert plane.pki is not None and plane.admin is not None
        self.plane = plane
        # More of Kueue's Configuration (a MultiKueue manager's `multiKueue` section).
        self.kueue_config = kueue_config or {}
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.rest = Rest(plane.url, plane.pki.ca, plane.admin.cert, plane.admin.key)
        self.ca_bundle = base64.b64encode(plane.pki.ca.read_bytes()).decode()
        self.jobset = Manager(JOBSET, directory)
        self.kueue = Manager(KUEUE, directory)
        # What start() put into the cluster, as collection paths, in the order made.
        self.installed: list[str] = []

    # -- start ---------------------------------------------------------------------
    def start(self, *, kueue: bool = True) -> Ecosystem:
        try:
            self.launch(kueue=kueue)
            self.wait_started()
        except BaseException:
            self.stop()
            raise
        return self

    def launch(self, *, kueue: bool = True) -> None:
        """Install both and start both managers, without waiting for their webhooks:
        Kueue's start overlaps JobSet's, and a caller with several clusters overlaps
        theirs (``wait_started`` waits; ``stop`` is the caller's on failure)."""
        self._launch_jobset()
        if kueue:
            self._launch_kueue()

    def wait_started(self) -> None:
        """Until each manager launched admits through its webhooks."""
        if self.jobset.process is not None:
            self._wait_admitting(self.jobset, self._probe_jobset)
        if self.kueue.process is not None:
            self._wait_admitting(self.kueue, self._probe_kueue)

    def _launch_jobset(self) -> None:
        manager = self.jobset
        bindir = ensure_built(JOBSET)
        source = module_dir(JOBSET) / "config" / "components"
        self._apply_crds(manager, source)
        patches = {
            "MutatingWebhookConfiguration": _json_patches(
                source / "webhook" / "patches" / "mutating-patch.yaml"
            ),
            "ValidatingWebhookConfiguration": _json_patches(
                source / "webhook" / "patches" / "validating-patch.yaml"
            ),
        }
        self._apply_webhooks(manager, source / "webhook" / "manifests.yaml", "jobset-", patches)
        config = {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {
                "port": manager.port,
                "host": "127.0.0.1",
                "certDir": str(self._certs("jobset")),
            },
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": "0"},
            "clientConnection": {"qps": 500, "burst": 500},
        }
        self._spawn(manager, bindir, config)

    def _launch_kueue(self) -> None:
        manager = self.kueue
        bindir = ensure_built(KUEUE)
        source = module_dir(KUEUE) / "config" / "components"
        self._apply_crds(manager, source)
        if self._ensure_namespace(KUEUE_NAMESPACE):
            self.installed.append(f"/api/v1/namespaces/{KUEUE_NAMESPACE}")
        selectors = _strategic_webhooks(source / "webhook" / "kustomization.yaml")
        self._apply_webhooks(
            manager, source / "webhook" / "manifests.yaml", "kueue-", {}, selectors
        )
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {
                "port": manager.port,
                "host": "127.0.0.1",
                "certDir": str(self._certs("kueue")),
            },
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": "0"},
            "manageJobsWithoutQueueName": False,
            # batch/job too, as in Kueue's own default configuration: its Job webhook also
            # judges the child Jobs of a JobSet, and panics without that integration.
            # Unqueued batch Jobs (the batch runtime's) stay unmanaged all the same.
            "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
            "clientConnection": {"qps": 500, "burst": 500},
            # The on-demand visibility API is an aggregated API server of its own: not
            # what a training job meets, and it would want an APIService registered.
            "featureGates": {"VisibilityOnDemand": False},
            **self.kueue_config,
        }
        # Without its internal cert management, Kueue reads its metrics server's certificate
        # from a path it does not let be configured (the Deployment mounts a Secret there):
        # given, in a mount namespace of its own, on an overlay of /etc that leaves the
        # machine's /etc untouched.
        certs = Path(config["webhook"]["certDir"])
        overlay = self.directory / "kueue-etc"
        for part in ("upper", "work"):
            (overlay / part).mkdir(parents=True, exist_ok=True)
        wrapper = (
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-ec",
            f"mount -t overlay overlay -o lowerdir=/etc,upperdir={overlay / 'upper'},"
            f"workdir={overlay / 'work'} /etc; mkdir -p {METRICS_CERTS}; "
            f'cp {certs / "tls.crt"} {certs / "tls.key"} {METRICS_CERTS}/; exec "$@"',
            "kueue",
        )
        self._spawn(manager, bindir, config, wrapper)

    # -- pieces --------------------------------------------------------------------
    def _certs(self, name: str) -> Path:
        assert self.plane.pki is not None
        pair = self.plane.pki.serving(f"{name}-webhook")
        directory = self.directory / f"{name}-certs"
        directory.mkdir(exist_ok=True)
        shutil.copy(pair.cert, directory / "tls.crt")
        shutil.copy(pair.key, directory / "tls.key")
        return directory

    def _client_config(self, manager: Manager, service: dict[str, Any]) -> dict[str, Any]:
        return {"url": manager.url + str(service.get("path") or "/"), "caBundle": self.ca_bundle}

    def _apply_crds(self, manager: Manager, components: Path) -> None:
        """The module's CRDs, with the conversion webhooks its kustomization enables,
        all applied and then all awaited (each is established on its own)."""
        converted = _converted(components)
        names = []
        for path in sorted((components / "crd" / "bases").glob("*.yaml")):
            for crd in _documents(path):
                name = crd["metadata"]["name"]
                if name in converted:
                    crd["spec"]["conversion"] = {
                        "strategy": "Webhook",
                        "webhook": {
                            "clientConfig": self._client_config(manager, {"path": "/convert"}),
                            "conversionReviewVersions": ["v1"],
                        },
                    }
                self._apply(CRDS, crd)
                names.append(name)
        for name in names:
            self._wait(
                f"CRD {name} established",
                lambda n=name: _established(self.rest.get_or_none(f"{CRDS}/{n}")),
            )

    def _apply_webhooks(
        self,
        manager: Manager,
        manifests: Path,
        prefix: str,
        json_patches: dict[str, list[dict[str, Any]]],
        merged: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        for config in _documents(manifests):
            kind = config["kind"]
            for op in json_patches.get(kind, []):
                if op.get("op") == "replace" and str(op.get("path", "")).startswith("/webhooks/"):
                    config["webhooks"][int(op["path"].split("/")[2])] = op["value"]
            for webhook in config["webhooks"]:
                webhook.update(
                    {
                        k: v
                        for k, v in (merged or {}).get(webhook["name"], {}).items()
                        if k != "name"
                    }
                )
                webhook["clientConfig"] = self._client_config(
                    manager, webhook["clientConfig"].get("service") or {}
                )
            config["metadata"]["name"] = prefix + config["metadata"]["name"]
            plural = (
                "mutatingwebhookconfigurations"
                if kind.startswith("Mutating")
                else ("validatingwebhookconfigurations")
            )
            self._apply(f"/apis/admissionregistration.k8s.io/v1/{plural}", config)

    def _apply(self, collection: str, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        if f"{collection}/{name}" not in self.installed:
            self.installed.append(f"{collection}/{name}")
        existing = self.rest.get_or_none(f"{collection}/{name}")
        if existing is None:
            self.rest.create(collection, body)
        else:
            body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
            self.rest.put(f"{collection}/{name}", body)

    def _ensure_namespace(self, name: str) -> bool:
        """Create the namespace if missing; whether it was made here."""
        if self.rest.get_or_none(f"/api/v1/namespaces/{name}") is not None:
            return False
        self.rest.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
        return True

    def _spawn(
        self, manager: Manager, bindir: Path, config: dict[str, Any], wrapper: tuple[str, ...] = ()
    ) -> None:
        assert self.plane.pki is not None
        name = manager.component.name
        identity = self.plane.pki.client(name, f"{name}-controller", ("system:masters",))
        kubeconfig = write_kubeconfig(
            self.directory / f"{name}.kubeconfig", self.plane.url, self.plane.pki.ca, identity
        )
        config_file = self.directory / f"{name}-config.yaml"
        config_file.write_text(yaml.safe_dump(config))
        log = open(manager.log, "ab")  # noqa: SIM115 - owned by the process (kept on a restart)
        manager.process = subprocess.Popen(
            [
                *wrapper,
                str(bindir / manager.component.binary),
                f"--kubeconfig={kubeconfig}",
                f"--config={config_file}",
                "--zap-log-level=info",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        log.close()

    def _wait_admitting(self, manager: Manager, probe: Any) -> None:
        """Until a dry-run create through the manager's webhooks is admitted."""
        last = ["no answer yet"]

        def admitted() -> bool:
            manager.check_alive()
            try:
                probe()
            except requests.HTTPError as err:
                last[0] = err.response.text if err.response is not None else str(err)
                return False
            return True

        self._wait(f"{manager.component.name}'s webhooks to admit ({last[0]})", admitted)

    def _probe_jobset(self) -> None:
        body = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "probe", "namespace": "default"},
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "a",
                        "template": {
                            "spec": {
                                "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}
                            }
                        },
                    }
                ]
            },
        }
        self.rest.create(
            "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets", body, dryRun="All"
        )

    def _probe_kueue(self) -> None:
        body = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "probe"},
            "spec": {},
        }
        self.rest.create("/apis/kueue.x-k8s.io/v1beta2/resourceflavors", body, dryRun="All")

    def _wait(self, what: str, probe: Any, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not probe():
            if time.monotonic() > deadline:
                raise RuntimeError(f"gave up after {timeout:.0f} s waiting for {what}")
            time.sleep(0.2)  # a starting process: nothing to wait on but its answers

    # -- faults (tests/faults/test_service_faults.py) -------------------------------
    def kill_kueue(self) -> None:
        """Kueue's controller manager SIGKILLed by its pid (its webhooks go with it)."""
        assert self.kueue.process is not None
        os.kill(self.kueue.process.pid, signal.SIGKILL)
        self.kueue.process.wait(timeout=STOP_TIMEOUT)

    def start_kueue_again(self) -> None:
        """Kueue started again as it was (same port, configuration and log), until its
        webhooks admit: its CRDs and webhook configurations are applied unchanged."""
        self._launch_kueue()
        self._wait_admitting(self.kueue, self._probe_kueue)

    # -- stop ----------------------------------------------------------------------
    def stop(self) -> None:
        for manager in (self.kueue, self.jobset):
            process = manager.process
            if process is None or process.poll() is not None:
                continue
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def uninstall(self) -> None:
        """Stop the managers and take out what ``start()`` installed: the webhook
        configurations first (no request may meet a webhook whose server is gone), then
        the CRDs (their objects with them: the finalizers of any left are cleared, since
        no controller is there to clear them) and Kueue's namespace, each waited for."""
        webhooks = [p for p in self.installed if "/admissionregistration.k8s.io/" in p]
        for path in webhooks:
            self._delete(path)
        self.stop()
        crds = [p for p in self.installed if p.startswith(CRDS + "/")]
        for path in crds:
            crd = self.rest.get_or_none(path)
            if crd is not None:
                self._clear_finalizers(crd)
                self._delete(path)
        for path in reversed(self.installed):
            if path not in webhooks and path not in crds:
                self._delete(path)
        for path in self.installed:
            self._wait(f"{path} to go", lambda p=path: self.rest.get_or_none(p) is None)
        self.installed.clear()

    def _clear_finalizers(self, crd: dict[str, Any]) -> None:
        """Remove the finalizers of every object of ``crd`` (their controllers stopped)."""
        group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
        # The storage version: no conversion webhook (its server stopped) is asked.
        (version,) = [v["name"] for v in crd["spec"]["versions"] if v.get("storage")]
        collection = f"/apis/{group}/{version}/{plural}"
        for obj in self.rest.get(collection)["items"]:
            meta = obj["metadata"]
            if not meta.get("finalizers"):
                continue
            where = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
            path = f"/apis/{group}/{version}{where}/{plural}/{meta['name']}"
            try:
                self.rest.patch(path, {"metadata": {"finalizers": None}})
            except requests.HTTPError as err:
                if err.response is None or err.response.status_code != 404:
                    raise

    def _delete(self, path: str) -> None:
        try:
            self.rest.delete(path)
        except requests.HTTPError as err:
            if err.response is None or err.response.status_code != 404:
                raise

    def __enter__(self) -> Ecosystem:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def crds(component: Component) -> Iterator[dict[str, Any]]:
    """The component's CRDs as its module publishes them (no conversion webhook)."""
    bases = module_dir(component) / "config" / "components" / "crd" / "bases"
    for path in sorted(bases.glob("*.yaml")):
        yield from _documents(path)


def established(crd: dict[str, Any] | None) -> bool:
    return _established(crd)


def _converted(components: Path) -> set[str]:
    """The CRDs whose conversion webhook the module's crd kustomization enables."""
    enabled = _enabled_crd_patches(components / "crd" / "kustomization.yaml")
    return {
        doc["metadata"]["name"]
        for patch in sorted((components / "crd" / "patches").glob("webhook_in_*.yaml"))
        if patch.name in enabled
        for doc in _documents(patch)
    }


def _enabled_crd_patches(kustomization: Path) -> set[str]:
    patches = yaml.safe_load(kustomization.read_text()).get("patches") or []
    return {Path(p["path"]).name for p in patches if isinstance(p, dict) and p.get("path")}


def _established(crd: dict[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)
