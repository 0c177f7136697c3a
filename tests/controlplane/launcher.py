"""Start and stop one real control plane on loopback: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler, as one process group.

Everything a run needs is made fresh in its directory: certificates, the
service-account key pair, kubeconfigs, the audit policy, etcd's data. The API
server runs with RBAC authorization and its default admission plugins
(ServiceAccount, PodSecurity, NamespaceLifecycle, ...), and writes every request
it serves to the audit log as one JSON line (verb, URI, user, response code):
that log is the real server's request log. The controller manager runs the
controllers a training job meets (job, garbage collector, TTL after finished,
namespace, service accounts); the scheduler binds pods to the fake node that
``kubelet.py`` registers.

Each process gets ``PR_SET_PDEATHSIG``: if the test process dies without
cleaning up, the kernel kills the control plane with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .build import ensure_built
from .pki import PKI, KeyPair

ADMIN = "mxgitops-admin"  # the tests' own identity (system:masters): harness reads and writes
CLIENT = "mxgitops-test"  # the identity mxgitops runs as in tests (system:masters)
START_TIMEOUT = 90.0
STOP_TIMEOUT = 5.0
# Controllers a training job meets, and the CronJob that syncs; the rest (nodes,
# node IPAM, ...) are left out. The endpoint controllers give a Service its
# endpoints, which kube-proxy and CoreDNS on the real node route and resolve.
CONTROLLERS = (
    "job-controller",
    "cronjob-controller",
    "endpoints-controller",
    "endpointslice-controller",
    # A PersistentVolumeClaim (the CronJob's Git cache) bound to a PersistentVolume,
    # and either deleted once no pod uses it.
    "persistentvolume-binder-controller",
    "persistentvolumeclaim-protection-controller",
    "persistentvolume-protection-controller",
    "garbage-collector-controller",
    "ttl-after-finished-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
)
# The controllers' and the scheduler's own rate limits, raised above the defaults (20
# and 50 requests a second) as a cluster's operators raise them for bursts of Jobs: every
# controller shares one client, and at 20 a second a test's 50 Jobs kept the job
# controller and the garbage collector seconds behind, acting on Jobs already deleted.
CLIENT_QPS = ("--kube-api-qps=500", "--kube-api-burst=1000")
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def write_kubeconfig(path: Path, url: str, ca: Path, user: KeyPair, name: str = "real") -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url, "certificate-authority": str(ca)}}],
        "users": [
            {
                "name": name,
                "user": {"client-certificate": str(user.cert), "client-key": str(user.key)},
            }
        ],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}
        ],
        "current-context": name,
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class ControlPlane:
    """A running control plane rooted at ``directory``; use as a context manager."""

    directory: Path
    audit_log: Path | None = None
    # False: etcd and kube-apiserver only (benchmarks of API traffic, where the job
    # controller starting thousands of pods would only add noise).
    controllers: bool = True
    # The real node's pods reach the API server at the host's end of the node's veth
    # pair (netns.py): it listens there instead of on loopback.
    bind_address: str = "127.0.0.1"
    # Fault tests (tests/faults/): more controllers (the node lifecycle's) and flags
    # that shorten their waits, each component's flags added after its own.
    extra_controllers: tuple[str, ...] = ()
    flags: dict[str, tuple[str, ...]] = field(default_factory=dict)
    url: str = ""
    pki: PKI | None = None
    admin: KeyPair | None = None
    client: KeyPair | None = None
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    argvs: dict[str, list[str]] = field(default_factory=dict)  # to start one again
    _group: int | None = None
    _bindir: Path | None = None
    _etcd_data: Path | None = None

    # -- start -------------------------------------------------------------------
    def start(self) -> ControlPlane:
        self.launch()
        return self.wait_started()

    def launch(self) -> None:
        """Start etcd and kube-apiserver without waiting for them, so that a caller with
        several control planes has them start at once; ``wait_started`` finishes."""
        self._bindir = bindir = ensure_built()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.audit_log = self.audit_log or self.directory / "audit.log"
        self.pki = pki = PKI(self.directory / "pki")
        self.admin = pki.client("admin", ADMIN, ("system:masters",))
        self.client = pki.client("client", CLIENT, ("system:masters",))
        try:
            etcd = self._start_etcd(bindir)
            self._start_apiserver(bindir, etcd)
            if self.controllers:  # their identity made while the API server starts
                components = pki.client("components", "mxgitops-components", ("system:masters",))
                write_kubeconfig(self._components_kubeconfig, self.url, pki.ca, components)
        except BaseException:
            self.stop()
            raise

    def wait_started(self) -> ControlPlane:
        """Until the API server is ready, then the controllers and the scheduler."""
        assert self._bindir is not None
        bindir = self._bindir
        try:
            self._wait_ready()
            if not self.controllers:
                return self
            kubeconfig = self._components_kubeconfig
            self._start_controller_manager(bindir, kubeconfig)
            self._start_scheduler(bindir, kubeconfig)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def _components_kubeconfig(self) -> Path:
        return self.directory / "components.kubeconfig"

    def _spawn(self, name: str, argv: list[str]) -> None:
        self.argvs[name] = argv  # restart() adds the flags again
        argv = [*argv, *self.flags.get(name, ())]
        log = open(self.directory / f"{name}.log", "ab")  # noqa: SIM115 - owned by the process
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            process_group=self._group or 0,
            preexec_fn=die_with_parent,
        )
        log.close()
        if self._group is None:
            self._group = process.pid
        self.processes[name] = process

    def _start_etcd(self, bindir: Path) -> str:
        client, peer = free_port(), free_port()
        client_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        # etcd's data in memory when the machine has /dev/shm: no disk latency in tests
        shm = Path("/dev/shm")
        self._etcd_data = Path(
            tempfile.mkdtemp(prefix="mxgitops-etcd-", dir=shm if shm.is_dir() else self.directory)
        )
        self._spawn(
            "etcd",
            [
                str(bindir / "etcd"),
                "--name=mxgitops",
                f"--data-dir={self._etcd_data}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=mxgitops={peer_url}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        return client_url

    def _start_apiserver(self, bindir: Path, etcd: str) -> None:
        assert self.pki is not None and self.audit_log is not None
        port = free_port()
        self.url = f"https://{self.bind_address}:{port}"
        serving = self.pki.serving(extra_ips=(self.bind_address,))
        policy = self.directory / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY))
        self._spawn(
            "kube-apiserver",
            [
                str(bindir / "kube-apiserver"),
                f"--etcd-servers={etcd}",
                f"--bind-address={self.bind_address}",
                f"--advertise-address={self.bind_address}",
                f"--secure-port={port}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={self.pki.ca}",
                # A node's name resolves nowhere here: reach kubelets at their InternalIP.
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                "--authorization-mode=RBAC",
                "--allow-privileged=true",
                "--service-cluster-ip-range=10.0.0.0/16",  # a /24 is full at 254 Services
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={self.pki.service_account_pub}",
                f"--service-account-signing-key-file={self.pki.service_account_key}",
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
                "--audit-log-maxbackup=0",
                "--audit-log-maxsize=0",
            ],
        )

    def _start_controller_manager(self, bindir: Path, kubeconfig: Path) -> None:
        assert self.pki is not None
        self._spawn(
            "kube-controller-manager",
            [
                str(bindir / "kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--controllers={','.join((*CONTROLLERS, *self.extra_controllers))}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--root-ca-file={self.pki.ca}",
                f"--service-account-private-key-file={self.pki.service_account_key}",
                "--concurrent-job-syncs=10",
                *CLIENT_QPS,
            ],
        )

    def _start_scheduler(self, bindir: Path, kubeconfig: Path) -> None:
        self._spawn(
            "kube-scheduler",
            [
                str(bindir / "kube-scheduler"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                *CLIENT_QPS,
            ],
        )

    def _wait_ready(self) -> None:
        assert self.pki is not None and self.admin is not None
        context = ssl.create_default_context(cafile=str(self.pki.ca))
        context.load_cert_chain(str(self.admin.cert), str(self.admin.key))
        deadline = time.monotonic() + START_TIMEOUT
        last = "no answer yet"
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", context=context, timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError as err:  # refused while starting, 500 until post-start hooks ran
                last = str(err)
            time.sleep(0.2)  # polling a starting process: nothing to wait on but the port
        raise RuntimeError(f"kube-apiserver not ready after {START_TIMEOUT:.0f} s: {last}")

    def check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                tail = (self.directory / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{tail}")

    # -- faults ------------------------------------------------------------------
    def kill(self, name: str) -> None:
        """Kill one process (``kube-apiserver``: the cluster is lost to its clients)."""
        process = self.processes[name]
        process.kill()
        process.wait()

    def restart(self, name: str) -> None:
        """Start a killed process again with the same flags (same port, same data)."""
        self._spawn(name, self.argvs[name])
        if name == "kube-apiserver":
            self._wait_ready()

    # -- use ---------------------------------------------------------------------
    def kubeconfig(
        self, path: Path, user: KeyPair | None = None, server: str | None = None
    ) -> Path:
        """A kubeconfig for ``user`` (default: the tests' mxgitops identity), naming
        ``server`` (default: the API server itself; the fault proxy for fault tests)."""
        assert self.pki is not None and self.client is not None
        return write_kubeconfig(path, server or self.url, self.pki.ca, user or self.client)

    # -- stop --------------------------------------------------------------------
    def stop(self) -> None:
        """Stop in reverse start order (clients before the API server before etcd), each
        with SIGTERM and then SIGKILL after a grace period; finally sweep the group."""
        for process in reversed(self.processes.values()):
            if process.poll() is None:
                process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._group is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._group, signal.SIGKILL)
            self._group = None
        if self._etcd_data is not None:
            shutil.rmtree(self._etcd_data, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
