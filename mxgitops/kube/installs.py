"""What `mxgitops install` and `uninstall` ask of the cluster: the installation's own
objects read, applied server-side under install's field manager (or only dry-run),
listed by install's label and deleted; and what the installing user may do (a
SelfSubjectAccessReview). Only the kinds the packaged manifests hold are served here.
"""

from __future__ import annotations

from urllib.parse import quote

from mxgitops.errors import ClusterClientError
from mxgitops.kube import transport as kubehttp
from mxgitops.kube.calls import Calls
from mxgitops.objects import Kind, KubeObject

APPLY_PATCH = "application/apply-patch+yaml"
# kind: (group's path, plural, namespaced), of every kind install makes.
KINDS: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("/api/v1", "namespaces", False),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Secret": ("/api/v1", "secrets", True),
    "Service": ("/api/v1", "services", True),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "CronJob": ("/apis/batch/v1", "cronjobs", True),
    "Job": ("/apis/batch/v1", "jobs", True),
    "Pod": ("/api/v1", "pods", True),
}


def kind_path(kind: str, namespace: str | None = None, name: str | None = None) -> str:
    """The path of `kind`'s objects: one of install's KINDS, or a kind of a job's objects
    (namespaced, as every one is) that mxgitops knows (`objects.Kind`: a runtime's)."""
    if kind in KINDS:
        group, plural, namespaced = KINDS[kind]
    else:
        known = Kind(kind)
        group, plural, namespaced = known.api, known.resource, True
    path = (
        f"{group}/namespaces/{namespace}/{plural}"
        if namespaced and namespace
        else (f"{group}/{plural}")
    )
    return f"{path}/{quote(name, safe='')}" if name else path


def object_path(obj: KubeObject) -> str:
    metadata = obj["metadata"]
    return kind_path(str(obj["kind"]), metadata.get("namespace"), metadata["name"])


class Installs(Calls):
    """install's and uninstall's requests."""

    def read_object(self, obj: KubeObject) -> KubeObject | None:
        """The live object of `obj`'s kind, namespace and name; None if there is none."""
        try:
            return self._request("GET", object_path(obj))
        except ClusterClientError as exc:
            if exc.status == 404:
                return None
            raise

    def apply_object(self, obj: KubeObject, *, manager: str, dry_run: bool) -> KubeObject:
        """Server-side apply of `obj` as `manager` (taking over fields another manager set:
        install's flags say what they are); with `dry_run`, what the server would make."""
        query = {"fieldManager": manager, "force": "true"}
        if dry_run:
            query["dryRun"] = "All"
        return self._call(
            "PATCH",
            object_path(obj),
            body=obj,
            query=query,
            read=kubehttp.read_object,
            content_type=APPLY_PATCH,
        )

    def create_object(self, obj: KubeObject) -> bool:
        """Create `obj`; False if one of its name exists."""
        metadata = obj["metadata"]
        try:
            self._request("POST", kind_path(str(obj["kind"]), metadata.get("namespace")), obj)
        except ClusterClientError as exc:
            if exc.reason == "AlreadyExists":
                return False
            raise
        return True

    def labelled(self, kind: str, selector: str, namespace: str | None = None) -> list[KubeObject]:
        """The objects of `kind` (in `namespace`, else everywhere) carrying `selector`;
        none where the kind is not served (404)."""
        query = {"labelSelector": selector}
        try:
            answer = self._call(
                "GET", kind_path(kind, namespace), query=query, read=kubehttp.read_object
            )
        except ClusterClientError as exc:
            if exc.status == 404:
                return []
            raise
        return list(answer.get("items") or [])

    def delete_object(self, obj: KubeObject) -> bool:
        """Delete `obj` (its dependents in the background); False if it was gone."""
        try:
            self._request("DELETE", object_path(obj), {"propagationPolicy": "Background"})
        except ClusterClientError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def may(self, verb: str, group: str, resource: str, namespace: str | None) -> bool | None:
        """Whether the user may `verb` the `resource` (SelfSubjectAccessReview); None if
        the server does not say."""
        attributes = {"verb": verb, "group": group, "resource": resource}
        if namespace:
            attributes["namespace"] = namespace
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        try:
            answer = self._request("POST", path, review)
        except ClusterClientError as exc:
            if exc.status in (404, 405):
                return None
            raise
        allowed = (answer.get("status") or {}).get("allowed")
        return allowed if isinstance(allowed, bool) else None
