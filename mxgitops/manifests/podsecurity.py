"""The Kubernetes Pod Security Standards, checked on a pod template before it is applied.

A jobs repository is a way into the cluster: whoever merges a manifest runs its
pods. The policy's `podSecurity` level closes that way the way a namespace's
PodSecurity admission does, but in the pull request and before any write, so a
violating job is never created (and, with tenancy, admission still has the last
word). The checks are those of the standard's `latest` version as of
Kubernetes 1.34 (https://kubernetes.io/docs/concepts/security/pod-security-standards/),
every control of `baseline` and then `restricted`, each violation named as the
standard names the control; a differential test holds them to the real
kube-apiserver's admission.

Only the pod template as the manifest writes it is checked. What mxgitops adds
(labels, DMLC_* variables, and the accelerators config's driver mounts, which
are hostPath volumes by nature and the operator's alone to set) is not: see
README, "Policy".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

FieldPath = tuple[str | int, ...]


class Level(StrEnum):
    PRIVILEGED = "privileged"
    BASELINE = "baseline"
    RESTRICTED = "restricted"

    @property
    def rank(self) -> int:
        return list(Level).index(self)


BASELINE_CAPABILITIES = frozenset(
    {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
     "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
)  # fmt: skip
SAFE_SYSCTLS = frozenset(
    {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
     "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
     "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
     "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
     "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}
)  # fmt: skip
SELINUX_TYPES = frozenset(
    {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
)
RESTRICTED_VOLUMES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
     "projected", "secret"}
)  # fmt: skip
SECURE_SECCOMP = ("RuntimeDefault", "Localhost")
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


@dataclass(frozen=True)
class Violation:
    """One control of the standard a pod template breaks."""

    level: Level  # the level whose control it is
    control: str  # the standard's name of the control: "Privileged Containers"
    path: FieldPath  # within the pod template
    message: str

    def __str__(self) -> str:
        return f"{self.control} ({self.level}): {self.message}"


def check(template: Mapping[str, Any], level: Level) -> list[Violation]:
    """Every control of `level` (and of the levels below it) the template breaks."""
    if level is Level.PRIVILEGED:
        return []
    pod = _Pod.of(template)
    found = list(_baseline(pod, restricted=level is Level.RESTRICTED))
    if level is Level.RESTRICTED:
        found += _restricted(pod)
    return found


@dataclass(frozen=True)
class _Pod:
    spec: Mapping[str, Any]
    security: Mapping[str, Any]
    annotations: Mapping[str, Any]

    @classmethod
    def of(cls, template: Mapping[str, Any]) -> _Pod:
        spec = _map(template.get("spec"))
        metadata = _map(template.get("metadata"))
        return cls(spec, _map(spec.get("securityContext")), _map(metadata.get("annotations")))

    def containers(self) -> Iterator[tuple[FieldPath, Mapping[str, Any]]]:
        for key in CONTAINER_LISTS:
            for index, container in enumerate(_list(self.spec.get(key))):
                if isinstance(container, Mapping):
                    yield ("spec", key, index), container

    @property
    def windows(self) -> bool:
        return _map(self.spec.get("os")).get("name") == "windows"


_POD_SC: FieldPath = ("spec", "securityContext")


def _baseline(pod: _Pod, *, restricted: bool) -> Iterator[Violation]:
    """Baseline's controls; under restricted, those it replaces by stricter ones are left out
    (capabilities, seccomp, hostPath volumes), as the admission does."""

    def bad(control: str, path: FieldPath, message: str) -> Violation:
        return Violation(Level.BASELINE, control, path, message)

    if _map(pod.security.get("windowsOptions")).get("hostProcess") is True:
        yield bad("HostProcess", (*_POD_SC, "windowsOptions", "hostProcess"), "must not be true")
    for name in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.spec.get(name) is True:
            yield bad("Host Namespaces", ("spec", name), "must not be true")
    for index, volume in enumerate(_list(pod.spec.get("volumes"))):
        if not restricted and isinstance(volume, Mapping) and volume.get("hostPath") is not None:
            yield bad(
                "HostPath Volumes",
                ("spec", "volumes", index, "hostPath"),
                f"volume {volume.get('name')!r} is a hostPath volume",
            )
    for index, sysctl in enumerate(_list(pod.security.get("sysctls"))):
        sysctl_name = _map(sysctl).get("name")
        if sysctl_name not in SAFE_SYSCTLS:
            where = (*_POD_SC, "sysctls", index)
            yield bad("Sysctls", where, f"{sysctl_name!r} is not a safe sysctl")
    yield from _selinux(_POD_SC, pod.security)
    yield from _apparmor(_POD_SC, pod.security)
    if not restricted:
        yield from _unconfined(_POD_SC, pod.security)
    for key, value in pod.annotations.items():
        if str(key).startswith(APPARMOR_ANNOTATION) and not _apparmor_value_ok(value):
            yield bad(
                "AppArmor",
                ("metadata", "annotations", key),
                f"{value!r} is not runtime/default or localhost/*",
            )
    for path, container in pod.containers():
        yield from _baseline_container(path, container, restricted=restricted)


def _baseline_container(
    path: FieldPath, container: Mapping[str, Any], *, restricted: bool
) -> Iterator[Violation]:
    sc = _map(container.get("securityContext"))
    at = (*path, "securityContext")
    what = f"container {container.get('name')!r}"

    def bad(control: str, where: FieldPath, message: str) -> Violation:
        return Violation(Level.BASELINE, control, where, f"{what}: {message}")

    if _map(sc.get("windowsOptions")).get("hostProcess") is True:
        yield bad("HostProcess", (*at, "windowsOptions", "hostProcess"), "must not be true")
    if sc.get("privileged") is True:
        yield bad("Privileged Containers", (*at, "privileged"), "must not be true")
    added = [str(c) for c in _list(_map(sc.get("capabilities")).get("add"))]
    beyond = sorted(set(added) - BASELINE_CAPABILITIES)
    if beyond and not restricted:
        yield bad(
            "Capabilities",
            (*at, "capabilities", "add"),
            f"adds {', '.join(beyond)}, beyond baseline",
        )
    for index, port in enumerate(_list(container.get("ports"))):
        if _map(port).get("hostPort"):
            yield bad("Host Ports", (*path, "ports", index, "hostPort"), "must be unset or 0")
    for violation in [*_selinux(at, sc), *_apparmor(at, sc)]:
        yield Violation(violation.level, violation.control, violation.path, f"{what}: "
                        + violation.message)  # fmt: skip
    if sc.get("procMount") not in (None, "Default"):
        yield bad("/proc Mount Type", (*at, "procMount"), "must be unset or Default")
    if not restricted:
        for violation in _unconfined(at, sc):
            yield Violation(violation.level, violation.control, violation.path, f"{what}: "
                            + violation.message)  # fmt: skip


def _selinux(at: FieldPath, sc: Mapping[str, Any]) -> Iterator[Violation]:
    options = _map(sc.get("seLinuxOptions"))
    where = (*at, "seLinuxOptions")
    if options.get("type", "") not in SELINUX_TYPES:
        message = f"type {options.get('type')!r} is not one of container_t, container_init_t, "
        message += "container_kvm_t, container_engine_t"
        yield Violation(Level.BASELINE, "SELinux", (*where, "type"), message)
    for key in ("user", "role"):
        if options.get(key):
            yield Violation(Level.BASELINE, "SELinux", (*where, key), "must not be set")


def _apparmor(at: FieldPath, sc: Mapping[str, Any]) -> Iterator[Violation]:
    profile = sc.get("appArmorProfile")
    kind = _map(profile).get("type")
    if profile is not None and kind not in ("RuntimeDefault", "Localhost"):
        yield Violation(
            Level.BASELINE,
            "AppArmor",
            (*at, "appArmorProfile", "type"),
            f"{kind!r} is not RuntimeDefault or Localhost",
        )


def _apparmor_value_ok(value: Any) -> bool:
    text = str(value)
    return not text or text == "runtime/default" or text.startswith("localhost/")


def _unconfined(at: FieldPath, sc: Mapping[str, Any]) -> Iterator[Violation]:
    if _map(sc.get("seccompProfile")).get("type") == "Unconfined":
        yield Violation(
            Level.BASELINE, "Seccomp", (*at, "seccompProfile", "type"), "must not be Unconfined"
        )


def _restricted(pod: _Pod) -> Iterator[Violation]:
    def bad(control: str, path: FieldPath, message: str) -> Violation:
        return Violation(Level.RESTRICTED, control, path, message)

    for index, volume in enumerate(_list(pod.spec.get("volumes"))):
        kinds = sorted(set(_map(volume)) - {"name"} - RESTRICTED_VOLUMES)
        if kinds:
            yield bad(
                "Volume Types",
                ("spec", "volumes", index, kinds[0]),
                f"volume {_map(volume).get('name')!r} is of type {kinds[0]}",
            )
    pod_non_root = pod.security.get("runAsNonRoot")
    if pod_non_root is False:
        yield bad("Running as Non-root", (*_POD_SC, "runAsNonRoot"), "must not be false")
    if pod.security.get("runAsUser") == 0:
        yield bad("Running as Non-root user", (*_POD_SC, "runAsUser"), "must not be 0")
    pod_seccomp = _map(pod.security.get("seccompProfile")).get("type")
    if pod_seccomp is not None and pod_seccomp not in SECURE_SECCOMP:
        yield bad("Seccomp", (*_POD_SC, "seccompProfile", "type"), _SECCOMP_MESSAGE)
    for path, container in pod.containers():
        sc = _map(container.get("securityContext"))
        at = (*path, "securityContext")
        what = f"container {container.get('name')!r}: "
        if sc.get("runAsNonRoot") is False or (
            sc.get("runAsNonRoot") is None and pod_non_root is not True
        ):
            yield bad(
                "Running as Non-root",
                (*at, "runAsNonRoot"),
                what + "must be true (here or the pod's)",
            )
        if sc.get("runAsUser") == 0:
            yield bad("Running as Non-root user", (*at, "runAsUser"), what + "must not be 0")
        if pod.windows:
            continue  # the standard exempts Windows pods from the Linux-only controls below
        if sc.get("allowPrivilegeEscalation") is not False:
            yield bad(
                "Privilege Escalation", (*at, "allowPrivilegeEscalation"), what + "must be false"
            )
        seccomp = _map(sc.get("seccompProfile")).get("type")
        if seccomp not in SECURE_SECCOMP and (
            seccomp is not None or pod_seccomp not in SECURE_SECCOMP
        ):
            yield bad("Seccomp", (*at, "seccompProfile", "type"), what + _SECCOMP_MESSAGE)
        capabilities = _map(sc.get("capabilities"))
        if "ALL" not in [str(c) for c in _list(capabilities.get("drop"))]:
            yield bad("Capabilities", (*at, "capabilities", "drop"), what + "must drop ALL")
        added = sorted({str(c) for c in _list(capabilities.get("add"))} - {"NET_BIND_SERVICE"})
        if added:
            yield bad(
                "Capabilities",
                (*at, "capabilities", "add"),
                what + f"may add only NET_BIND_SERVICE, not {', '.join(added)}",
            )


_SECCOMP_MESSAGE = "must be RuntimeDefault or Localhost (here or the pod's)"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
