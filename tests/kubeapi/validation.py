"""Semantic validation (the REST strategies' Validate / ValidateUpdate).

Runs after decoding (:mod:`.schema`) and defaulting (:mod:`.defaults`) and
returns ``FieldError`` lists that become a 422 Invalid with one cause per
error, exactly as ``apierrors.NewInvalid`` builds it.  Implemented rules:

* object metadata: name required / valid for the kind (DNS-1123 subdomain,
  DNS-1035 label for Services), label keys and values, generateName;
* Jobs: restartPolicy OnFailure|Never, containers present with name and image,
  non-negative counts, manual selector matching, the generated ``job-name``
  labels (hence names over 63 characters fail), and on update the immutable
  ``spec.selector``, ``spec.template``, ``completionMode`` and ``podFailurePolicy``;
* Pods: containers, and on update the real "pod updates may not change fields
  other than ..." rule (image changes allowed);
* Services: clusterIP immutable;
* every kind: metadata.uid/creationTimestamp/name immutable, no new
  finalizers while being deleted.

Rules no test breaks, for objects the real kube-apiserver judges anyway, are left
to it: a Job's ``podFailurePolicy`` contents, a Pod's ``restartPolicy``, a
Service's type and ports (``tests/runtimes/test_rendered_dry_run.py`` dry-runs every
object mxgitops renders, on both backends; ``tests/controlplane/DIFFERENCES.md``).
"""

from __future__ import annotations

import json
from typing import Any

from . import names
from .errors import FieldError
from .resources import Resource

_NAME_RULES = {"Service": names.dns1035_label_errors}


_VALID_KEYS = names.qualified_name_errors.valid
_VALID_VALUES = names.label_value_errors.valid


def _labels(labels: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for key, value in (labels or {}).items():
        # Most labels were seen before and found valid: two set look-ups, not two calls.
        if key in _VALID_KEYS and type(value) is str and value in _VALID_VALUES:
            continue
        for problem in names.qualified_name_errors(key):
            errors.append(FieldError("Invalid value", path, key, problem))
        for problem in names.label_value_errors(value or ""):
            errors.append(FieldError("Invalid value", path, value, problem))
    return errors


def metadata(res: Resource, obj: dict[str, Any]) -> list[FieldError]:
    meta = obj.get("metadata") or {}
    errors: list[FieldError] = []
    name = meta.get("name", "")
    if not name:
        errors.append(
            FieldError("Required value", "metadata.name", detail="name or generateName is required")
        )
    else:
        rule = _NAME_RULES.get(res.kind, names.dns1123_subdomain_errors)
        errors.extend(FieldError("Invalid value", "metadata.name", name, p) for p in rule(name))
    errors.extend(_labels(meta.get("labels"), "metadata.labels"))
    for key in meta.get("annotations") or {}:
        if key.lower() in _VALID_KEYS:
            continue
        for problem in names.qualified_name_errors(key.lower()):
            errors.append(FieldError("Invalid value", "metadata.annotations", key, problem))
    return errors


def _containers(spec: dict[str, Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    containers = spec.get("containers") or []
    if not containers:
        errors.append(FieldError("Required value", f"{path}.containers"))
    seen: set[str] = set()
    for i, c in enumerate(containers):
        where = f"{path}.containers[{i}]"
        name = c.get("name") or ""
        if not name:
            errors.append(FieldError("Required value", f"{where}.name"))
        else:
            errors.extend(
                FieldError("Invalid value", f"{where}.name", name, p)
                for p in names.dns1123_label_errors(name)
            )
            if name in seen:
                errors.append(FieldError("Duplicate value", f"{where}.name", name))
            seen.add(name)
        if not c.get("image"):
            errors.append(FieldError("Required value", f"{where}.image"))
    return errors


def _non_negative(spec: dict[str, Any], path: str, *fields: str) -> list[FieldError]:
    return [
        FieldError("Invalid value", f"{path}.{f}", spec[f], "must be greater than or equal to 0")
        for f in fields
        if isinstance(spec.get(f), int) and spec[f] < 0
    ]


def _selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if (
            (op == "In" and not (present and labels[key] in values))
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True


def job(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    pod = template.get("spec") or {}
    errors = _non_negative(
        spec, "spec", "parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"
    )
    template_labels = (template.get("metadata") or {}).get("labels") or {}
    errors.extend(_labels(template_labels, "spec.template.labels"))
    selector = spec.get("selector")
    if not selector:
        errors.append(FieldError("Required value", "spec.selector"))
    elif not _selector_matches(selector, template_labels):
        errors.append(
            FieldError(
                "Invalid value",
                "spec.template.metadata.labels",
                template_labels,
                "`selector` does not match template `labels`",
            )
        )
    errors.extend(_containers(pod, "spec.template.spec"))
    restart = pod.get("restartPolicy")
    if restart not in ("OnFailure", "Never"):
        # kube-apiserver v1.34 words it so, even for a value that is present ("Always")
        errors.append(
            FieldError(
                "Required value",
                "spec.template.spec.restartPolicy",
                detail='valid values: "OnFailure", "Never"',
            )
        )
    return errors


def pod(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec") or {}
    return _containers(spec, "spec")


_KIND_RULES = {"Job": job, "Pod": pod}


def validate_create(res: Resource, obj: dict[str, Any]) -> list[FieldError]:
    rule = _KIND_RULES.get(res.kind)
    return metadata(res, obj) + (rule(obj) if rule else [])


def _immutable(new: Any, old: Any, path: str) -> list[FieldError]:
    if new == old:
        return []
    return [FieldError("Invalid value", path, new, "field is immutable")]


_POD_MUTABLE = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def _without_images(spec: dict[str, Any]) -> str:
    stripped = json.loads(json.dumps(spec))
    for key in ("containers", "initContainers"):
        for c in stripped.get(key) or []:
            c.pop("image", None)
    for key in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"):
        stripped.pop(key, None)
    return json.dumps(stripped, sort_keys=True)


def validate_update(
    res: Resource, new: dict[str, Any], old: dict[str, Any], status_only: bool = False
) -> list[FieldError]:
    errors = [] if status_only else validate_create(res, new)
    new_meta, old_meta = new["metadata"], old["metadata"]
    for key in ("uid", "creationTimestamp"):
        errors.extend(_immutable(new_meta.get(key), old_meta.get(key), f"metadata.{key}"))
    if old_meta.get("deletionTimestamp"):
        added = [
            f
            for f in new_meta.get("finalizers") or []
            if f not in (old_meta.get("finalizers") or [])
        ]
        if added:
            errors.append(
                FieldError(
                    "Forbidden",
                    "metadata.finalizers",
                    detail="no new finalizers can be added if the object is being deleted, "
                    f"found new finalizers []string{{{', '.join(json.dumps(f) for f in added)}}}",
                )
            )
    if status_only:
        return errors
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    if res.kind == "Job":
        for key in ("selector", "template", "completionMode", "podFailurePolicy"):
            errors.extend(_immutable(new_spec.get(key), old_spec.get(key), f"spec.{key}"))
    elif res.kind == "Pod" and len(new_spec.get("containers") or []) != len(
        old_spec.get("containers") or []
    ):
        errors.append(
            FieldError(
                "Forbidden",
                "spec.containers",
                detail="pod updates may not add or remove containers",
            )
        )
    elif res.kind == "Pod" and _without_images(new_spec) != _without_images(old_spec):
        errors.append(FieldError("Forbidden", "spec", detail=_POD_MUTABLE))
    elif res.kind == "Service" and old_spec.get("clusterIP") != new_spec.get("clusterIP"):
        errors.append(
            FieldError(
                "Invalid value",
                "spec.clusterIPs[0]",
                new_spec.get("clusterIPs"),
                "may not change once set",
            )
        )
    return errors
