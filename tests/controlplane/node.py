"""A real node beside a real control plane: containerd with runc, the CNI bridge,
kubelet, kube-proxy and CoreDNS, all in the node's own network namespace
(``netns.py``), with their state in one directory.

The node is called ``mxgitops-node``, like the fake kubelet's; pods on it are real
containers: the pod sandbox and the images come from ``images.py`` (imported into
containerd, no registry), their network from the bridge plugin on ``10.244.0.0/24``,
Service addresses from kube-proxy's iptables rules in the node's namespace, names in
``cluster.local`` from CoreDNS at the node's own address (the pods' ``clusterDNS``;
it answers nothing outside the cluster: there is no upstream). kubelet uses the
cgroupfs driver under a cgroup root of its own (``/mxgitops-node-<index>``): this
machine has cgroup v1 and no systemd.

Stopping is thorough because a node leaves more behind than its processes:
container processes (killed through the node's cgroups), runc shims (found by the
containerd socket on their command line), mounts under the node's directory
(volumes, rootfs, network namespaces: unmounted deepest first), the cgroup tree,
and the network namespace itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .images import pause_archive, toolbox_archive
from .launcher import ControlPlane, die_with_parent, write_kubeconfig
from .netns import NodeNetwork
from .nodebuild import ensure_node_built
from .nodeconfig import cni_config, containerd_config, corefile, kube_proxy_config, kubelet_config
from .rest import Rest

NODE_NAME = "mxgitops-node"
POD_SUBNET = "10.244.0.0/24"
CLUSTER_CIDR = "10.244.0.0/16"
SERVICE_CIDR = "10.0.0.0/16"
CGROUP_ROOT = Path("/sys/fs/cgroup")
START_TIMEOUT = 120.0
STOP_TIMEOUT = 10.0


def _wait(what: str, probe: Any, timeout: float, alive: Any) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        alive()
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise RuntimeError(f"real node: gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)  # a starting process: nothing to wait on but what it writes


def _v1_hierarchies() -> list[Path]:
    """The mounted cgroup v1 hierarchies (cpu, memory, ..., the named systemd one)."""
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mountpoint, fstype, *_ = line.split()
        if fstype in ("cgroup", "cgroup2") and mountpoint.startswith(str(CGROUP_ROOT) + "/"):
            found.append(Path(mountpoint))
    return found


@dataclass
class RealNode:
    """A running node joined to ``plane``; use as a context manager."""

    plane: ControlPlane
    network: NodeNetwork
    directory: Path
    images: tuple[Path, ...] = ()  # more image archives to import beside the node's own
    # KubeletConfiguration fields set over ``nodeconfig.kubelet_config``'s (fault tests)
    kubelet_overrides: dict[str, Any] = field(default_factory=dict)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    argv: dict[str, list[str]] = field(default_factory=dict)  # to start one again
    binaries: dict[str, Path] = field(default_factory=dict)

    @property
    def cgroup_root(self) -> str:
        return f"/mxgitops-node-{self.network.index}"

    @property
    def containerd_socket(self) -> Path:
        return self.directory / "containerd.sock"

    # -- start -------------------------------------------------------------------
    def start(self) -> RealNode:
        self.binaries = ensure_node_built()
        archives = [pause_archive(), toolbox_archive(), *self.images]
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self._make_cgroup_root()
            kubeconfig = self._node_kubeconfig()
            self._start_containerd()
            for archive in archives:
                self.ctr("images", "import", "--local", str(archive))
            self._start_kubelet(kubeconfig)
            self._start_kube_proxy(kubeconfig)
            self._start_coredns(kubeconfig)
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _node_kubeconfig(self) -> Path:
        assert self.plane.pki is not None
        # system:masters: the control plane authorizes by RBAC alone (no Node authorizer)
        identity = self.plane.pki.client("node", f"system:node:{NODE_NAME}", ("system:masters",))
        return write_kubeconfig(
            self.directory / "node.kubeconfig", self.plane.url, self.plane.pki.ca, identity
        )

    def _env(self) -> dict[str, str]:
        dirs = sorted({str(path.parent) for path in self.binaries.values()})
        return {**os.environ, "PATH": os.pathsep.join([*dirs, os.environ.get("PATH", "")])}

    def _spawn(self, name: str, argv: list[str]) -> None:
        self.argv[name] = argv
        log = open(self.directory / f"{name}.log", "ab")  # noqa: SIM115 - owned by the process
        self.processes[name] = subprocess.Popen(
            self.network.in_netns(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self._env(),
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        log.close()

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> int:
        """Signal one node process (kubelet, containerd, ...) by its pid and wait for it
        to exit; its pid. What it started (containers, shims) is left running."""
        process = self.processes[name]
        process.send_signal(sig)
        process.wait(timeout=STOP_TIMEOUT * 6)
        return process.pid

    def start_again(self, name: str) -> None:
        """Start a process stopped by ``kill`` again, as it was started, and wait for
        the node to be Ready."""
        self._spawn(name, self.argv[name])
        if name == "containerd":  # answering: a SIGKILLed one leaves its socket file
            _wait("containerd to answer", self._answers, START_TIMEOUT, self._check_alive)
        self._wait_ready()

    def _answers(self) -> bool:
        try:
            self.ctr("version")
        except RuntimeError:
            return False
        return True

    def _check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                tail = (self.directory / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"real node: {name} exited with {process.returncode}:\n{tail}")

    def ctr(self, *args: str) -> str:
        """``ctr`` against this node's containerd, in the namespace kubelet's pods use."""
        command = [
            str(self.binaries["ctr"]),
            "--address",
            str(self.containerd_socket),
            "--namespace",
            "k8s.io",
            *args,
        ]
        done = subprocess.run(command, capture_output=True, text=True, env=self._env())
        if done.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def _make_cgroup_root(self) -> None:
        for hierarchy in _v1_hierarchies():
            path = hierarchy / self.cgroup_root.lstrip("/")
            path.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):  # empty in a new v1 cpuset: copy them
                parent = hierarchy / name
                if parent.is_file() and not (path / name).read_text().strip():
                    (path / name).write_text(parent.read_text())

    def _start_containerd(self) -> None:
        state = self.directory / "containerd"
        (self.directory / "cni").mkdir(exist_ok=True)
        (self.directory / "cni" / "10-mxgitops.conflist").write_text(
            json.dumps(cni_config(POD_SUBNET, self.directory / "cni-ipam"), indent=2)
        )
        config = self.directory / "containerd.toml"
        config.write_text(
            containerd_config(
                state,
                self.containerd_socket,
                runc=self.binaries["runc"],
                cni_bin=self.binaries["bridge"].parent,
                cni_conf=self.directory / "cni",
            )
        )
        self._spawn("containerd", [str(self.binaries["containerd"]), "--config", str(config)])
        _wait(
            "containerd's socket", self.containerd_socket.exists, START_TIMEOUT, self._check_alive
        )

    def _start_kubelet(self, kubeconfig: Path) -> None:
        assert self.plane.pki is not None
        resolv = self.directory / "resolv.conf"
        resolv.write_text("")  # no upstream resolver: pods get only the cluster's DNS
        config = self.directory / "kubelet.yaml"
        config.write_text(
            yaml.safe_dump(
                kubelet_config(
                    directory=self.directory,
                    socket=self.containerd_socket,
                    cgroup_root=self.cgroup_root,
                    client_ca=self.plane.pki.ca,
                    node_ip=self.network.node_ip,
                    resolv=resolv,
                )
                | self.kubelet_overrides
            )
        )
        root = self.directory / "kubelet"
        self._spawn(
            "kubelet",
            [
                str(self.binaries["kubelet"]),
                f"--config={config}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={root}",
                f"--cert-dir={root / 'pki'}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={self.network.node_ip}",
                "--v=1",
            ],
        )

    def _start_kube_proxy(self, kubeconfig: Path) -> None:
        config = self.directory / "kube-proxy.yaml"
        config.write_text(yaml.safe_dump(kube_proxy_config(kubeconfig, NODE_NAME, CLUSTER_CIDR)))
        self._spawn("kube-proxy", [str(self.binaries["kube-proxy"]), f"--config={config}"])

    def _start_coredns(self, kubeconfig: Path) -> None:
        config = self.directory / "Corefile"
        config.write_text(corefile(self.network.node_ip, kubeconfig))
        self._spawn("coredns", [str(self.binaries["coredns"]), "-conf", str(config)])

    def _wait_ready(self) -> None:
        assert self.plane.pki is not None and self.plane.admin is not None
        rest = Rest(self.plane.url, self.plane.pki.ca, self.plane.admin.cert, self.plane.admin.key)

        def ready() -> bool:
            node = rest.get_or_none(f"/api/v1/nodes/{NODE_NAME}")
            conditions = ((node or {}).get("status") or {}).get("conditions") or []
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        _wait(f"node {NODE_NAME} Ready", ready, START_TIMEOUT, self._check_alive)
        # kubelet registers the node tainted not-ready; the node lifecycle controller,
        # which is not run (it would evict the fake node's pods on the other control
        # plane's tests), lifts the taint once the node is Ready: here, this does.
        node = rest.get(f"/api/v1/nodes/{NODE_NAME}")
        taints = node["spec"].get("taints") or []
        taints = [t for t in taints if t["key"] != "node.kubernetes.io/not-ready"]
        rest.patch(f"/api/v1/nodes/{NODE_NAME}", {"spec": {"taints": taints or None}})

    # -- stop --------------------------------------------------------------------
    def stop(self) -> None:
        for name in ("coredns", "kube-proxy", "kubelet"):
            self._terminate(name)
        self._kill_cgroup_processes()
        self._terminate("containerd")
        self._kill_shims()
        self._unmount_all()
        self._remove_cgroup_root()
        self._remove_container_log_links()

    def _terminate(self, name: str) -> None:
        process = self.processes.get(name)
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _cgroup_dirs(self) -> list[Path]:
        """Every cgroup under the node's root, in every hierarchy, deepest first."""
        found: list[Path] = []
        for hierarchy in _v1_hierarchies():
            top = hierarchy / self.cgroup_root.lstrip("/")
            if top.is_dir():
                found += [Path(d) for d, _, _ in os.walk(top)]
        return sorted(found, key=lambda p: len(p.parts), reverse=True)

    def _kill_cgroup_processes(self) -> None:
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline:
            pids = {
                int(pid)
                for directory in self._cgroup_dirs()
                for pid in _read(directory / "cgroup.procs").split()
            }
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)  # the kernel reaps killed processes: poll the cgroups

    def _kill_shims(self) -> None:
        needle = str(self.containerd_socket).encode()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and needle in _read_bytes(entry / "cmdline"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry.name), signal.SIGKILL)

    def _unmount_all(self) -> None:
        prefix = str(self.directory.resolve()) + "/"
        mounts = [
            line.split()[4]
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4].startswith(prefix)
        ]
        for mountpoint in sorted(set(mounts), key=len, reverse=True):
            subprocess.run(["umount", "-l", mountpoint], capture_output=True)

    def _remove_cgroup_root(self) -> None:
        for directory in self._cgroup_dirs():
            with contextlib.suppress(OSError):
                directory.rmdir()

    def _remove_container_log_links(self) -> None:
        """kubelet links every container's log into /var/log/containers (a path it
        does not let one configure); the links into this node's directory go with it."""
        links = Path("/var/log/containers")
        prefix = str(self.directory.resolve())
        for link in links.glob("*.log") if links.is_dir() else ():
            with contextlib.suppress(OSError):
                if os.readlink(link).startswith(prefix):
                    link.unlink()

    def __enter__(self) -> RealNode:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


@contextlib.contextmanager
def real_node_cluster(
    directory: Path,
    audit_log: Path | None = None,
    images: Sequence[Path] = (),
    *,
    extra_controllers: tuple[str, ...] = (),
    flags: dict[str, tuple[str, ...]] | None = None,
    kubelet_overrides: dict[str, Any] | None = None,
    started: list[RealNode] | None = None,
) -> Iterator[ControlPlane]:
    """A node network, a control plane listening on its host end, and the real node
    (appended to ``started``, for a test that stops and starts its processes)."""
    with contextlib.ExitStack() as stack:
        network = stack.enter_context(NodeNetwork())
        plane = stack.enter_context(
            ControlPlane(
                directory / "plane",
                audit_log=audit_log,
                bind_address=network.host_ip,
                extra_controllers=extra_controllers,
                flags=dict(flags or {}),
            )
        )
        node = stack.enter_context(
            RealNode(
                plane, network, directory / "node", tuple(images), dict(kubelet_overrides or {})
            )
        )
        if started is not None:
            started.append(node)
        yield plane
