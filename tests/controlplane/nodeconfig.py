"""The real node's configuration files, as values: containerd's TOML, the CNI network,
kubelet's and kube-proxy's configuration objects, CoreDNS's Corefile.

Every path a component would otherwise take from the host (``/var/lib/kubelet``,
``/run/containerd``, ``/etc/cni/net.d``, ``/var/log/pods``, ...) is set to one under
the node's own directory, so two nodes on one machine (a CI run beside a person's)
do not meet; what cannot be moved is named in ``node.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .images import PAUSE_IMAGE


def containerd_config(
    state: Path, socket: Path, *, runc: Path, cni_bin: Path, cni_conf: Path
) -> str:
    return f"""\
version = 3
root = "{state / "root"}"
state = "{state / "state"}"
temp = "{state / "tmp"}"
# NRI and the tracing/metrics endpoints would take host-wide sockets and ports.
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[debug]
  level = "info"

[plugins."io.containerd.internal.v1.opt"]
  path = "{state / "opt"}"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{PAUSE_IMAGE}"

[plugins."io.containerd.cri.v1.runtime"]
  netns_mounts_under_state_dir = true
  # This machine's root lacks CAP_SYS_RESOURCE (not in the bounding set): no process
  # may lower its oom_score_adj, which runc does for a pod's sandbox (-998). Scores
  # below containerd's own are raised to it instead (the kernel's OOM kill of a
  # container over its memory limit does not depend on them).
  restrict_oom_score_adj = true
  enable_unprivileged_ports = true
  enable_unprivileged_icmp = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        Root = "{state / "runc"}"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{cni_conf}"

[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def cni_config(subnet: str, ipam_dir: Path) -> dict[str, Any]:
    """The pods' network: one bridge with its gateway in the node's namespace; pods'
    traffic to the host's end of the veth is masqueraded to the node's address."""
    return {
        "cniVersion": "1.0.0",
        "name": "mxgitops",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": subnet}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(ipam_dir),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(
    *,
    directory: Path,
    socket: Path,
    cgroup_root: str,
    client_ca: Path,
    node_ip: str,
    resolv: Path,
) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "containerRuntimeEndpoint": f"unix://{socket}",
        # This machine: cgroup v1 (hybrid) and no systemd as PID 1.
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "cgroupRoot": cgroup_root,
        "failSwapOn": False,
        "address": node_ip,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        # The API server is the only client that reaches the kubelet's port (logs,
        # exec): anonymous and allowed, as the API server presents no client certificate.
        "authentication": {
            "anonymous": {"enabled": True},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "clusterDomain": "cluster.local",
        "clusterDNS": [node_ip],
        "resolvConf": str(resolv),
        "podLogsDir": str(directory / "pod-logs"),
        "volumePluginDir": str(directory / "volume-plugins"),
        "serializeImagePulls": False,
        # Images come from archives, not a registry: never collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # A busy shared disk must not evict the tests' pods.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "maxPods": 110,
        "registerNode": True,
        "enableServer": True,
        "nodeStatusReportFrequency": "10s",
        "shutdownGracePeriod": "0s",
    }


def kube_proxy_config(kubeconfig: Path, node_name: str, cluster_cidr: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node_name,
        "mode": "iptables",
        "clusterCIDR": cluster_cidr,
        "bindAddress": "127.0.0.1",
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        # The node's namespace has its own conntrack settings: leave the host's alone.
        "conntrack": {"maxPerCore": 0},
        "iptables": {"masqueradeAll": True},
    }


def corefile(address: str, kubeconfig: Path) -> str:
    """cluster.local from the API server; every other name fails fast (no upstream)."""
    return f"""\
.:53 {{
    bind {address}
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    cache 5
}}
"""
