"""mxgitops' Pod Security checks against the real thing: kube-apiserver's PodSecurity admission.

Each case is one control's violating or compliant form, put on two pods: a plain
one and one hardened to pass `restricted`. Every pod is dry-run created in a
namespace enforcing `baseline` and in one enforcing `restricted`; the controls
the admission names must be exactly those `podsecurity.check` names.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mxgitops.manifests.podsecurity import Level, check

# The admission's name of each control -> the standard's, as podsecurity names it.
ADMISSION_NAMES = {
    "allowPrivilegeEscalation != false": "Privilege Escalation",
    "forbidden AppArmor profile": "AppArmor",
    "forbidden AppArmor profiles": "AppArmor",
    "non-default capabilities": "Capabilities",
    "unrestricted capabilities": "Capabilities",
    "host namespaces": "Host Namespaces",
    "hostPath volumes": "HostPath Volumes",
    "hostPort": "Host Ports",
    "hostProcess": "HostProcess",
    "privileged": "Privileged Containers",
    "procMount": "/proc Mount Type",
    "restricted volume types": "Volume Types",
    "runAsNonRoot != true": "Running as Non-root",
    "runAsUser=0": "Running as Non-root user",
    "seccompProfile": "Seccomp",
    "seLinuxOptions": "SELinux",
    "forbidden sysctls": "Sysctls",
}

HARDENED_CONTAINER = {
    "securityContext": {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        "capabilities": {"drop": ["ALL"]},
    }
}


def sc(**fields: Any) -> dict[str, Any]:
    return {"securityContext": fields}


# name -> (pod spec fields, fields of the mxnet container, pod annotations)
Case = tuple[dict[str, Any], dict[str, Any], dict[str, str]]
CASES: dict[str, Case] = {
    "nothing": ({}, {}, {}),
    "hostNetwork": ({"hostNetwork": True}, {}, {}),
    "hostPID": ({"hostPID": True}, {}, {}),
    "hostIPC": ({"hostIPC": True}, {}, {}),
    "hostNetwork-false": ({"hostNetwork": False}, {}, {}),
    "privileged": ({}, sc(privileged=True, allowPrivilegeEscalation=True), {}),
    "privileged-false": ({}, sc(privileged=False), {}),
    "cap-add-NET_ADMIN": ({}, sc(capabilities={"add": ["NET_ADMIN"]}), {}),
    "cap-add-CHOWN": ({}, sc(capabilities={"add": ["CHOWN"]}), {}),
    "cap-add-NET_BIND_SERVICE": ({}, sc(capabilities={"add": ["NET_BIND_SERVICE"]}), {}),
    "hostPath": (
        {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]},
        {},
        {},
    ),
    "hostPort": ({}, {"ports": [{"containerPort": 80, "hostPort": 8080}]}, {}),
    "containerPort-only": ({}, {"ports": [{"containerPort": 80}]}, {}),
    "apparmor-unconfined": ({}, sc(appArmorProfile={"type": "Unconfined"}), {}),
    "apparmor-runtime-default": ({}, sc(appArmorProfile={"type": "RuntimeDefault"}), {}),
    "apparmor-pod-unconfined": (
        {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
        {},
        {},
    ),
    "apparmor-annotation-unconfined": (
        {},
        {},
        {"container.apparmor.security.beta.kubernetes.io/mxnet": "unconfined"},
    ),
    "apparmor-annotation-runtime-default": (
        {},
        {},
        {"container.apparmor.security.beta.kubernetes.io/mxnet": "runtime/default"},
    ),
    "selinux-spc_t": ({}, sc(seLinuxOptions={"type": "spc_t"}), {}),
    "selinux-container_t": ({}, sc(seLinuxOptions={"type": "container_t"}), {}),
    "selinux-user": ({}, sc(seLinuxOptions={"user": "system_u"}), {}),
    "selinux-pod-role": ({"securityContext": {"seLinuxOptions": {"role": "sysadm_r"}}}, {}, {}),
    "procMount-unmasked": ({"hostUsers": False}, sc(procMount="Unmasked"), {}),
    "procMount-default": ({}, sc(procMount="Default"), {}),
    "seccomp-pod-unconfined": (
        {"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
        sc(seccompProfile=None),
        {},
    ),
    "seccomp-container-unconfined": ({}, sc(seccompProfile={"type": "Unconfined"}), {}),
    "seccomp-pod-runtime-default": (
        {"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
        sc(seccompProfile=None),
        {},
    ),
    "sysctl-safe": (
        {"securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}},
        {},
        {},
    ),
    "sysctl-tcp_rmem": (
        {
            "securityContext": {
                "sysctls": [{"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"}]
            }
        },
        {},
        {},
    ),
    "sysctl-unsafe": (
        {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}},
        {},
        {},
    ),
    "volume-emptyDir-configMap": (
        {"volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "configMap": {"name": "c"}}]},
        {},
        {},
    ),
    "volume-nfs": ({"volumes": [{"name": "n", "nfs": {"server": "nfs", "path": "/x"}}]}, {}, {}),
    "allowPrivilegeEscalation-true": ({}, sc(allowPrivilegeEscalation=True), {}),
    "runAsNonRoot-false": ({}, sc(runAsNonRoot=False), {}),
    "runAsNonRoot-pod": ({"securityContext": {"runAsNonRoot": True}}, sc(runAsNonRoot=None), {}),
    "runAsNonRoot-pod-false": ({"securityContext": {"runAsNonRoot": False}}, {}, {}),
    "runAsUser-0": ({}, sc(runAsUser=0), {}),
    "runAsUser-pod-0": ({"securityContext": {"runAsUser": 0}}, {}, {}),
    "runAsUser-1000": ({}, sc(runAsUser=1000), {}),
    "cap-drop-missing": ({}, sc(capabilities={"drop": ["NET_RAW"]}), {}),
    "init-privileged": (
        {
            "initContainers": [
                {
                    "name": "init",
                    "image": "busybox",
                    **sc(privileged=True, allowPrivilegeEscalation=True),
                },
            ]
        },
        {},
        {},
    ),
    "hostProcess": (
        {"hostNetwork": True, "os": {"name": "windows"}},
        {"securityContext": {"windowsOptions": {"hostProcess": True}}},
        {},
    ),
    "windows-restricted": (
        {"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": True}},
        {},
        {},
    ),
}


def merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`extra` merged into `base`; a None value removes the key."""
    result = copy.deepcopy(base)
    for key, value in extra.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def pod(case: Case, hardened: bool) -> dict[str, Any]:
    spec_fields, container_fields, annotations = case
    container = {"name": "mxnet", "image": "busybox"}
    if hardened:
        container = merged(container, HARDENED_CONTAINER)
    if hardened and spec_fields.get("os"):
        container = {"name": "mxnet", "image": "busybox"}  # Linux-only fields are refused
    spec = merged({"containers": [merged(container, container_fields)]}, spec_fields)
    if hardened:
        for init in spec.get("initContainers", []):
            init["securityContext"] = merged(
                HARDENED_CONTAINER["securityContext"], init["securityContext"]
            )
    metadata: dict[str, Any] = {"name": "check"}
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": spec}


def admission_controls(message: str) -> set[str]:
    """The controls named in `violates PodSecurity "LEVEL:latest": a (..), b (..)`."""
    listed = message.split('": ', 1)[1] if "violates PodSecurity" in message else ""
    parts, depth, current = [], 0, ""
    for char in listed:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    names = {part.strip().split(" (")[0] for part in parts if part.strip()}
    return {ADMISSION_NAMES.get(name, f"unknown: {name}") for name in names}


@pytest.fixture(scope="module")
def enforcing(control_plane: Any) -> dict[Level, str]:
    namespaces = {}
    for level in (Level.BASELINE, Level.RESTRICTED):
        name = f"pss-{level}"
        if control_plane.rest.get_or_none(f"/api/v1/namespaces/{name}") is None:
            control_plane.rest.create(
                "/api/v1/namespaces",
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {
                        "name": name,
                        "labels": {"pod-security.kubernetes.io/enforce": str(level)},
                    },
                },
            )
        control_plane.ensure_namespace(name)
        namespaces[level] = name
    return namespaces


@pytest.mark.parametrize("hardened", [False, True], ids=["plain", "hardened"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_checks_agree_with_podsecurity_admission(
    control_plane: Any, enforcing: dict[Level, str], name: str, hardened: bool
) -> None:
    template = pod(CASES[name], hardened)
    body = {"apiVersion": "v1", "kind": "Pod", **template}
    for level, namespace in enforcing.items():
        status, _, answer = control_plane.raw(
            "POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", body
        )
        message = str(answer.get("message", ""))
        assert status in (201, 403), f"{level}: {status} {message}"
        theirs = admission_controls(message) if status == 403 else set()
        ours = {v.control for v in check(template, level)}
        assert ours == theirs, f"{level}: admission says {message or 'allowed'}"


def test_the_cases_cover_every_control() -> None:
    named = set()
    for case in CASES.values():
        for hardened in (False, True):
            for level in (Level.BASELINE, Level.RESTRICTED):
                named |= {v.control for v in check(pod(case, hardened), level)}
    assert named == set(ADMISSION_NAMES.values())


def test_privileged_level_checks_nothing() -> None:
    assert check(pod(CASES["privileged"], False), Level.PRIVILEGED) == []
