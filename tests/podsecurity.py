"""The Pod Security Standards' `restricted` level, as a check of a pod spec for tests.

Written from the rules of https://kubernetes.io/docs/concepts/security/pod-security-standards/
(the baseline controls, then the restricted ones), for the policy version `latest` as of
Kubernetes 1.34. `violations(pod)` names each rule a pod spec (with its metadata, for the
AppArmor annotations) breaks; [] means it passes. The real PodSecurity admission of a
kube-apiserver judges the same pods where the tests start one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

BASELINE_CAPABILITIES = frozenset(
    [
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ]
)
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
SELINUX_TYPES = frozenset(
    {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
)
RESTRICTED_VOLUMES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
     "projected", "secret"}
)  # fmt: skip
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def violations(template: Mapping[str, Any]) -> list[str]:
    """Every restricted rule that a pod template ({metadata, spec}) breaks."""
    spec = template.get("spec") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    return [*_baseline(spec, annotations), *_restricted(spec)]


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for key in CONTAINER_LISTS:
        for container in spec.get(key) or []:
            yield f"{key}[{container.get('name')}]", container


def _baseline(spec: Mapping[str, Any], annotations: Mapping[str, str]) -> Iterator[str]:
    pod_sc = spec.get("securityContext") or {}
    if (pod_sc.get("windowsOptions") or {}).get("hostProcess"):
        yield "hostProcess: pod"
    for name in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(name):
            yield f"host namespaces: {name}"
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            yield f"hostPath volume {volume.get('name')}"
    for sysctl in pod_sc.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            yield f"sysctl {sysctl.get('name')}"
    yield from _selinux("pod", pod_sc)
    yield from _apparmor("pod", pod_sc)
    if (pod_sc.get("seccompProfile") or {}).get("type") == "Unconfined":
        yield "seccomp: pod Unconfined"
    for key, value in annotations.items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
            value == "runtime/default" or value.startswith("localhost/")
        ):
            yield f"AppArmor annotation {key}={value}"
    for where, container in _containers(spec):
        sc = container.get("securityContext") or {}
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            yield f"hostProcess: {where}"
        if sc.get("privileged"):
            yield f"privileged: {where}"
        added = set((sc.get("capabilities") or {}).get("add") or [])
        if added - BASELINE_CAPABILITIES:
            yield f"capabilities beyond baseline: {where} adds {sorted(added)}"
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                yield f"hostPort: {where}"
        yield from _selinux(where, sc)
        yield from _apparmor(where, sc)
        if sc.get("procMount", "Default") != "Default":
            yield f"procMount: {where}"
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            yield f"seccomp: {where} Unconfined"


def _selinux(where: str, sc: Mapping[str, Any]) -> Iterator[str]:
    options = sc.get("seLinuxOptions") or {}
    if options.get("type", "") not in SELINUX_TYPES or options.get("user") or options.get("role"):
        yield f"SELinux options: {where}"


def _apparmor(where: str, sc: Mapping[str, Any]) -> Iterator[str]:
    kind = (sc.get("appArmorProfile") or {}).get("type")
    if kind not in (None, "RuntimeDefault", "Localhost"):
        yield f"AppArmor profile: {where} {kind}"


def _restricted(spec: Mapping[str, Any]) -> Iterator[str]:
    pod_sc = spec.get("securityContext") or {}
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            yield f"volume type: {volume.get('name')} is {sorted(kinds)}"
    if pod_sc.get("runAsUser") == 0:
        yield "runAsUser 0: pod"
    pod_non_root = pod_sc.get("runAsNonRoot") is True
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    if pod_sc.get("runAsNonRoot") is False:
        yield "runAsNonRoot: pod sets false"
    for where, container in _containers(spec):
        sc = container.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            yield f"allowPrivilegeEscalation: {where} must set false"
        non_root = sc.get("runAsNonRoot")
        if non_root is False or (non_root is None and not pod_non_root):
            yield f"runAsNonRoot: {where}"
        if sc.get("runAsUser") == 0:
            yield f"runAsUser 0: {where}"
        seccomp = (sc.get("seccompProfile") or {}).get("type") or pod_seccomp
        if seccomp not in ("RuntimeDefault", "Localhost"):
            yield f"seccomp: {where} needs RuntimeDefault or Localhost"
        capabilities = sc.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            yield f"capabilities: {where} must drop ALL"
        if set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
            yield f"capabilities: {where} may add only NET_BIND_SERVICE"
