"""Defaulting, as kube-apiserver's registered defaulters and REST strategies do it.

mxgitops compares what it renders with what it reads back, so the fields the
server fills in matter: Job selector, template labels and spec defaults, pod
spec and container defaults, Service clusterIP/type/ports.  Only the
defaults of the kinds and fields this double's users rely on are applied; the
list is in :func:`apply_defaults`.
"""

from __future__ import annotations

from typing import Any

from .resources import Resource

CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID = "controller-uid"
LEGACY_JOB_NAME = "job-name"


def _container(c: dict[str, Any]) -> None:
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    if "imagePullPolicy" not in c:
        image = c.get("image", "")
        tag = image.rsplit("/", 1)[-1]
        latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
        c["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    c.setdefault("resources", {})
    for port in c.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for env in c.get("env") or []:
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if field_ref is not None:
            field_ref.setdefault("apiVersion", "v1")


def pod_spec(spec: dict[str, Any]) -> None:
    """``SetDefaults_PodSpec`` and the container defaulters."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        _container(c)


def job(obj: dict[str, Any]) -> None:
    """``SetDefaults_Job`` plus the Job strategy's selector generation."""
    spec = obj.setdefault("spec", {})
    template = spec.setdefault("template", {})
    meta = obj["metadata"]
    template_labels = (template.get("metadata") or {}).get("labels")
    if template_labels and not meta.get("labels"):
        meta["labels"] = dict(template_labels)
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault(
        "podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    )
    for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
        for condition in rule.get("onPodConditions") or []:
            condition.setdefault("status", "True")
    template_meta = template.setdefault("metadata", {})
    template_meta.setdefault("creationTimestamp", None)
    pod_spec(template.setdefault("spec", {}))


def job_selector(obj: dict[str, Any]) -> None:
    """Generated selector and template labels (create only, unless manualSelector)."""
    spec = obj["spec"]
    if spec.get("manualSelector"):
        return
    uid, name = obj["metadata"]["uid"], obj["metadata"]["name"]
    labels = spec["template"]["metadata"].setdefault("labels", {})
    labels.update(
        {CONTROLLER_UID: uid, JOB_NAME: name, LEGACY_CONTROLLER_UID: uid, LEGACY_JOB_NAME: name}
    )
    spec.setdefault("selector", {"matchLabels": {CONTROLLER_UID: uid}})


def service(obj: dict[str, Any], allocate_ip: Any) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    if spec["type"] != "ExternalName":
        if not spec.get("clusterIP"):
            spec["clusterIP"] = allocate_ip()
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        if spec["clusterIP"] != "None":
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")


def apply_defaults(res: Resource, obj: dict[str, Any], allocate_ip: Any) -> None:
    """Defaults applied on every write (create, update, patch)."""
    if res.kind == "Job":
        job(obj)
    elif res.kind == "Pod":
        pod_spec(obj.setdefault("spec", {}))
        obj["spec"].setdefault("enableServiceLinks", True)
        obj["spec"].setdefault("preemptionPolicy", "PreemptLowerPriority")
        obj["spec"].setdefault("priority", 0)
    elif res.kind == "Service":
        service(obj, allocate_ip)


def qos_class(spec: dict[str, Any]) -> str:
    containers = spec.get("containers") or []
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        r.get("limits", {}).get(k) is not None
        and r.get("requests", r.get("limits", {})).get(k) == r["limits"][k]
        for r in resources
        for k in ("cpu", "memory")
    )
    return "Guaranteed" if guaranteed else "Burstable"


def initial_status(res: Resource, obj: dict[str, Any]) -> dict[str, Any] | None:
    """The status a create resets to (strategies' PrepareForCreate)."""
    if res.kind == "Job":
        return {}
    if res.kind == "Pod":
        return {"phase": "Pending", "qosClass": qos_class(obj.get("spec") or {})}
    if res.kind == "Service":
        return {"loadBalancer": {}}
    return None
