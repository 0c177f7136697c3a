"""Discovery and OpenAPI documents, generated from :mod:`.resources`.

Serves the legacy (unaggregated) discovery documents: ``/version``, ``/api``,
``/api/v1``, ``/apis``, ``/apis/{group}/{version}``.  Clients that ask for
aggregated discovery (``as=APIGroupDiscoveryList``) also accept plain JSON
and fall back to the legacy documents, exactly as they do against an older
server, so kubectl and the Python client work unchanged.

``/openapi/v3`` lists one document per group version; each describes the
PATCH operation of every kind with its ``x-kubernetes-group-version-kind``
and the ``fieldValidation`` query parameter.  That is what kubectl checks
to decide that the server validates fields itself (``kubectl create -f``
then sends ``fieldValidation=Strict`` instead of validating client side).
No schemas are published (``/openapi/v2`` is a 404), so kubectl computes
apply patches from its built-in types, and ``kubectl explain`` does not work.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .resources import RESOURCES, VERBS, Resource, group_versions

VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0",
    "gitCommit": "70d3cc986aa8221cd1dfb1121852688902d3bf53",
    "gitTreeState": "clean",
    "buildDate": "2024-12-11T17:59:15Z",
    "goVersion": "go1.23.3",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _api_resources(gv: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in RESOURCES:
        if r.group_version != gv:
            continue
        entry: dict[str, Any] = {
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": True,
            "kind": r.kind,
            "verbs": list(VERBS),
        }
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        entry["storageVersionHash"] = hashlib.sha256(r.qualified.encode()).hexdigest()[:12]
        out.append(entry)
        if r.has_status:
            out.append(
                {
                    "name": f"{r.plural}/status",
                    "singularName": "",
                    "namespaced": True,
                    "kind": r.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    return out


def resource_list(gv: str) -> dict[str, Any] | None:
    resources = _api_resources(gv)
    if not resources:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(gv: str) -> dict[str, Any]:
    name, version = gv.split("/")
    entry = {"groupVersion": gv, "version": version}
    return {"name": name, "versions": [entry], "preferredVersion": entry}


def api_group_list() -> dict[str, Any]:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(gv) for gv in group_versions()],
    }


def api_group(group: str) -> dict[str, Any] | None:
    for gv in group_versions():
        if gv.split("/")[0] == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **_group(gv)}
    return None


def _openapi_path(gv: str) -> str:
    return "api/v1" if gv == "v1" else f"apis/{gv}"


def openapi_root() -> dict[str, Any]:
    paths = {}
    for gv in ["v1", *group_versions()]:
        digest = hashlib.sha512(json.dumps(openapi_document(gv)).encode()).hexdigest().upper()
        paths[_openapi_path(gv)] = {
            "serverRelativeURL": f"/openapi/v3/{_openapi_path(gv)}?hash={digest[:128]}"
        }
    return {"paths": paths}


def _patch_operation(r: Resource) -> dict[str, Any]:
    return {
        "operationId": f"patchNamespaced{r.kind}",
        "parameters": [
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
        ],
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
    }


def openapi_document(gv: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for r in RESOURCES:
        if r.group_version == gv:
            item = f"{r.api_prefix}/namespaces/{{namespace}}/{r.plural}/{{name}}"
            paths[item] = {"patch": _patch_operation(r)}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {},
    }


def openapi_document_for(path: str) -> dict[str, Any] | None:
    for gv in ["v1", *group_versions()]:
        if _openapi_path(gv) == path:
            return openapi_document(gv)
    return None
