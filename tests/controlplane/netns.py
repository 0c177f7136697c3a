"""The real node's network: a network namespace of its own, joined to this machine by
one veth pair, and nothing else.

Every node process (containerd, kubelet, kube-proxy, CoreDNS) runs inside the
namespace; pods get their own namespaces from containerd and a bridge inside the
node's namespace. The namespace has no default route: a pod can reach other pods,
the node's addresses and the host end of the veth pair (where the API server and the
tests' git server listen) and nothing beyond them. Neither kube-proxy's rules nor the
bridge touch the host's own network stack.

Each node takes a free ``/30`` of ``172.31.0.0/16`` (one per index; a second node on
the machine, a CI run beside a person's, takes the next), found by trying to create
the namespace, which fails if another node holds that name.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

PREFIX = "mxgn"  # interface and namespace names: mxgn<index>, host end mxgn<index>h
MAX_NODES = 250


def _ip(
    *args: str, netns: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    command = ["ip", *(("-n", netns) if netns else ()), *args]
    return subprocess.run(command, check=check, capture_output=True, text=True)


@dataclass
class NodeNetwork:
    """One node's namespace and veth pair; use as a context manager."""

    index: int = -1

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.index}"

    @property
    def host_ip(self) -> str:
        """The host's end: where the API server listens for the node and its pods."""
        return f"172.31.{self.index}.1"

    @property
    def node_ip(self) -> str:
        """The node's end: kubelet's InternalIP, CoreDNS's address."""
        return f"172.31.{self.index}.2"

    @property
    def netns_path(self) -> Path:
        return Path("/run/netns") / self.name

    def in_netns(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the node's network namespace (and only that namespace:
        the mounts stay the host's, so kubelet and containerd see each other's)."""
        return ["nsenter", f"--net={self.netns_path}", "--", *argv]

    def create(self) -> NodeNetwork:
        for index in range(MAX_NODES):
            self.index = index
            if _ip("netns", "add", self.name, check=False).returncode == 0:
                break
        else:
            raise RuntimeError(f"no free node network: {PREFIX}0..{MAX_NODES - 1} all in use")
        try:
            self._configure()
        except BaseException:
            self.delete()
            raise
        return self

    def _configure(self) -> None:
        host = f"{self.name}h"
        _ip("link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", self.name)
        _ip("addr", "add", f"{self.host_ip}/30", "dev", host)
        _ip("link", "set", host, "up")
        _ip("addr", "add", f"{self.node_ip}/30", "dev", "eth0", netns=self.name)
        _ip("link", "set", "eth0", "up", netns=self.name)
        _ip("link", "set", "lo", "up", netns=self.name)
        sysctls = {
            "net.ipv4.ip_forward": "1",
            # Service traffic between two pods on the bridge passes through iptables,
            # as kube-proxy requires (per namespace since Linux 5.3).
            "net.bridge.bridge-nf-call-iptables": "1",
            "net.ipv4.conf.all.route_localnet": "1",
        }
        for key, value in sysctls.items():
            subprocess.run(
                self.in_netns(["sysctl", "-q", "-w", f"{key}={value}"]),
                check=True,
                capture_output=True,
            )

    def cut(self) -> None:
        """Take the node's end of the pair down: the node and its pods reach nothing
        beyond the namespace (the API server neither), as a node whose network failed;
        the host's end keeps its address, so the API server still answers this host."""
        _ip("link", "set", "eth0", "down", netns=self.name)

    def restore(self) -> None:
        """Bring the node's end up again (its routes come back with it)."""
        _ip("link", "set", "eth0", "up", netns=self.name)

    def delete(self) -> None:
        """Remove the namespace (its end of the pair and the bridge go with it) and the
        host's end; a no-op for what is already gone."""
        _ip("netns", "delete", self.name, check=False)
        _ip("link", "delete", f"{self.name}h", check=False)

    def __enter__(self) -> NodeNetwork:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.delete()
