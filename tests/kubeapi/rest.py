"""REST semantics of kube-apiserver's generic registry, over :mod:`.store`.

Create, get, list, update (PUT), patch, delete and deletecollection, plus the
``status`` subresource, do what ``k8s.io/apiserver/pkg/registry/generic``
and the built-in strategies do: decode with ``fieldValidation``, fill in
metadata (uid, resourceVersion, creationTimestamp, generation, generateName),
default, validate, check optimistic concurrency, skip no-op updates, and run
garbage collection (ownerReferences with Background / Foreground / Orphan
propagation, finalizers).  The garbage collector runs synchronously inside the
DELETE request, so dependents are gone by the time the response is sent; this
is the one intentional timing difference from a real cluster.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import copy
import itertools
import json
from typing import Any

from . import defaults, errors, patch, schema, validation
from .errors import ApiError, FieldError
from .resources import RESOURCES, Resource
from .selectors import FieldRequirement, Requirement, match_fields, match_labels
from .store import Store, compact_json

META_V1 = "meta.k8s.io/v1"  # the group of PartialObjectMetadata(List)
JOB_ORPHAN_WARNING = (
    "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background "
    "to remove them or set propagationPolicy=Orphan to suppress this warning"
)
_SERVER_META = (
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
_SET_ON_CREATE = (*_SERVER_META, "resourceVersion")  # what a create drops from the body


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    return meta


class Rest:
    def __init__(self, store: Store) -> None:
        self.store = store

    # -- decoding ------------------------------------------------------------
    def _decode(
        self, res: Resource, body: Any, namespace: str, field_validation: str
    ) -> tuple[dict[str, Any], list[str], list[FieldError]]:
        if not isinstance(body, dict):
            raise errors.bad_request(
                f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: '
                "json: cannot unmarshal array into Go value of type struct"
            )
        api_version = body.get("apiVersion") or res.group_version
        if api_version != res.group_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({res.group_version})"
            )
        kind = body.get("kind") or res.kind
        if kind != res.kind:
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({res.kind})"
            )
        body["apiVersion"], body["kind"] = api_version, kind
        warnings, required = schema.decode(res, body, field_validation)
        meta = _meta(body)
        if meta.get("namespace") not in (None, "", namespace):
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        meta["namespace"] = namespace
        for key in ("selfLink", "managedFields"):
            meta.pop(key, None)
        return body, warnings, required

    def _invalid(self, res: Resource, name: str, errs: list[FieldError]) -> None:
        if errs:
            raise errors.invalid(res, name, errs)

    # -- reads ---------------------------------------------------------------
    def get(self, res: Resource, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.get(res, namespace, name)
        if obj is None:
            raise errors.not_found(res, name)
        return obj

    def list_json(
        self,
        res: Resource,
        namespace: str | None,
        labels: tuple[Requirement, ...],
        fields: tuple[FieldRequirement, ...],
        limit: int = 0,
        token: str = "",
        partial: bool = False,
    ) -> bytes:
        """A typed list, encoded; items carry neither kind nor apiVersion (as real).

        With `limit`, a page: items in key order (namespace, name) after the `token`'s
        key, and `metadata.continue` when more are left; its pages carry the first
        page's resourceVersion, but each is read when asked (not a snapshot).
        `partial`: a PartialObjectMetadataList, each item an object's metadata alone,
        with kind PartialObjectMetadata (as real)."""
        after, first_rv = _continue_from(token) if token else (None, "")

        def wanted(entry: Any) -> bool:
            return match_labels(labels, entry.obj["metadata"].get("labels")) and match_fields(
                fields, entry.obj
            )

        with self.store.lock:
            rv = first_rv or str(self.store.rv)
            more: str | None = None
            if limit > 0 or after is not None:
                entries = self._page(res, namespace, after, limit, wanted)
                if 0 < limit < len(entries):
                    entries = entries[:limit]
                    more = _continue_token(_key(entries[-1].obj), rv)
            else:
                entries = [e for e in self.store.entries(res, namespace) if wanted(e)]
            items = b",".join(_partial(e.obj) if partial else e.encoded_item() for e in entries)
        metadata = {"resourceVersion": rv, **({"continue": more} if more else {})}
        kind, version = res.list_kind, res.group_version
        if partial:
            kind, version = "PartialObjectMetadataList", META_V1
        head = json.dumps(
            {"kind": kind, "apiVersion": version, "metadata": metadata},
            separators=(",", ":"),
        ).encode()
        return head[:-1] + b',"items":[' + items + b"]}"

    # -- create --------------------------------------------------------------

    def _page(
        self,
        res: Resource,
        namespace: str | None,
        after: tuple[str, str] | None,
        limit: int,
        wanted: Any,
    ) -> list[Any]:
        """The wanted entries after `after` in key order, one more than `limit` at most
        (so the caller knows whether more are left). The kind is sorted once for all
        the pages of a LIST, not once per page: a LIST of N objects costs N log N."""
        keys, ordered = self.store.ordered(res)
        start = bisect.bisect_right(keys, after) if after is not None else 0
        found = []
        for entry in itertools.islice(ordered, start, None):
            if (namespace is None or _key(entry.obj)[0] == namespace) and wanted(entry):
                found.append(entry)
                if 0 < limit < len(found):
                    break
        return found

    def create(
        self,
        res: Resource,
        namespace: str,
        body: Any,
        field_validation: str = "Warn",
        dry_run: bool = False,
    ) -> tuple[dict[str, Any], list[str]]:
        obj, warnings, required = self._decode(res, body, namespace, field_validation)
        meta = obj["metadata"]
        with self.store.lock:
            if not meta.get("name") and meta.get("generateName"):
                while True:
                    meta["name"] = meta["generateName"][:58] + self.store.random_suffix()
                    if self.store.get(res, namespace, meta["name"]) is None:
                        break
            for key in _SET_ON_CREATE:
                meta.pop(key, None)
            meta["uid"] = self.store.new_uid()
            meta["creationTimestamp"] = self.store.timestamp()
            if res.tracks_generation:
                meta["generation"] = 1
            status = defaults.initial_status(res, obj)
            if status is not None:
                obj["status"] = status
            defaults.apply_defaults(res, obj, self.store.allocate_ip)
            if res.kind == "Job":
                defaults.job_selector(obj)
            name = meta.get("name", "")
            self._invalid(res, name, required + validation.validate_create(res, obj))
            if self.store.get(res, namespace, name) is not None:
                raise errors.already_exists(res, name)
            if dry_run:
                return obj, warnings
            return self.store.put(res, obj), warnings

    # -- update / patch --------------------------------------------------------
    def update(
        self,
        res: Resource,
        namespace: str,
        name: str,
        body: Any,
        subresource: str = "",
        field_validation: str = "Warn",
        dry_run: bool = False,
    ) -> tuple[dict[str, Any], list[str], bool]:
        """PUT; returns (object, warnings, created)."""
        obj, warnings, required = self._decode(res, body, namespace, field_validation)
        body_name = obj["metadata"].get("name")
        if not body_name:
            self._invalid(
                res,
                "",
                [
                    FieldError(
                        "Required value", "metadata.name", detail="name or generateName is required"
                    )
                ],
            )
        if body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        with self.store.lock:
            old = self.store.get(res, namespace, name)
            if old is None:
                if res.allow_create_on_update and not subresource:
                    created, warn = self.create(res, namespace, obj, field_validation, dry_run)
                    return created, warnings + warn, True
                raise errors.not_found(res, name)
            return self._replace(res, old, obj, required, subresource, dry_run), warnings, False

    def _replace(
        self,
        res: Resource,
        old: dict[str, Any],
        new: dict[str, Any],
        required: list[FieldError],
        subresource: str,
        dry_run: bool,
    ) -> dict[str, Any]:
        name = old["metadata"]["name"]
        wanted_rv = new["metadata"].get("resourceVersion")
        if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(res, name)
        if subresource == "status":
            # As the real status strategies: the spec stays, the caller's labels and
            # annotations are taken with the status.
            taken = {
                k: new["metadata"][k] for k in ("labels", "annotations") if k in new["metadata"]
            }
            new = {**copy.deepcopy(old), "status": new.get("status")}
            for key in ("labels", "annotations"):
                new["metadata"].pop(key, None)
            new["metadata"].update(copy.deepcopy(taken))
            required = [e for e in required if e.field.startswith("status")]
        else:
            meta, old_meta = new["metadata"], old["metadata"]
            for key in ("uid", "creationTimestamp"):  # settable only to their current value
                meta.setdefault(key, old_meta.get(key))
            for key in ("generation", "deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(key, None)
                if key in old_meta:
                    meta[key] = old_meta[key]
            if res.has_status:
                new["status"] = copy.deepcopy(old.get("status"))
                if new["status"] is None:
                    new.pop("status")
            if res.kind == "Service" and not (new.get("spec") or {}).get("clusterIP"):
                old_spec = old.get("spec") or {}
                spec = new.setdefault("spec", {})
                for key in ("clusterIP", "clusterIPs"):
                    if key in old_spec:
                        spec[key] = old_spec[key]
            defaults.apply_defaults(res, new, self.store.allocate_ip)
            if res.tracks_generation and new.get("spec") != old.get("spec"):
                meta["generation"] = old_meta.get("generation", 1) + 1
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        self._invalid(
            res, name, required + validation.validate_update(res, new, old, subresource == "status")
        )
        if new == old or dry_run:
            return new if dry_run else old
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            return self.store.remove(res, new)
        return self.store.put(res, new)

    def patch(
        self,
        res: Resource,
        namespace: str,
        name: str,
        content_type: str,
        body: bytes,
        subresource: str = "",
        field_validation: str = "Warn",
        dry_run: bool = False,
    ) -> tuple[dict[str, Any], list[str]]:
        if content_type not in patch.PATCH_TYPES or content_type == patch.APPLY_PATCH:
            raise errors.unsupported_media_type(
                [patch.JSON_PATCH, patch.MERGE_PATCH, patch.STRATEGIC_MERGE_PATCH]
            )
        try:
            document = json.loads(body or b"null")
        except ValueError as err:
            raise errors.bad_request(f"error decoding patch: {err}") from None
        with self.store.lock:
            old = self.get(res, namespace, name)
            current = copy.deepcopy(old)
            if content_type == patch.JSON_PATCH:
                patched = patch.json_patch(current, document)
            elif content_type == patch.MERGE_PATCH:
                if not isinstance(document, dict):
                    raise errors.bad_request("json: cannot unmarshal into a map")
                patched = patch.merge_patch(current, document)
            else:
                if not isinstance(document, dict):
                    raise errors.bad_request("json: cannot unmarshal into a map")
                patched = patch.strategic_merge_patch(current, document, schema.root_schema(res))
            if not isinstance(patched, dict):
                raise errors.bad_request("patched object is not a JSON object")
            if _meta(patched).get("name") != name:
                self._invalid(
                    res,
                    name,
                    [
                        FieldError(
                            "Invalid value",
                            "metadata.name",
                            patched["metadata"].get("name"),
                            "field is immutable",
                        )
                    ],
                )
            obj, warnings, required = self._decode(res, patched, namespace, field_validation)
            return self._replace(res, old, obj, required, subresource, dry_run), warnings

    # -- delete --------------------------------------------------------------
    def _policy(self, res: Resource, options: dict[str, Any]) -> tuple[str, list[str]]:
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = "Orphan" if options["orphanDependents"] else "Background"
        if policy is None:
            warn = [JOB_ORPHAN_WARNING] if res.kind == "Job" else []
            return res.default_propagation, warn
        if policy not in ("Foreground", "Background", "Orphan"):
            raise ApiError(
                422,
                "Invalid",
                f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
                f'"{policy}": supported values: "Foreground", "Background", "Orphan", "nil"',
            )
        return policy, []

    def delete(
        self,
        res: Resource,
        namespace: str,
        name: str,
        options: dict[str, Any],
        dry_run: bool = False,
    ) -> tuple[dict[str, Any], list[str]]:
        policy, warnings = self._policy(res, options)
        with self.store.lock:
            obj = self.get(res, namespace, name)
            pre = options.get("preconditions") or {}
            meta = obj["metadata"]
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                raise errors.conflict(
                    res,
                    name,
                    f"Precondition failed: UID in precondition: {pre['uid']}, UID in object "
                    f"meta: {meta['uid']}",
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise errors.conflict(
                    res,
                    name,
                    f"the ResourceVersion in the precondition ({pre['resourceVersion']}) does not "
                    f"match the ResourceVersion in record ({meta['resourceVersion']}). The object "
                    "might have been modified",
                )
            if dry_run or meta.get("deletionTimestamp"):
                return obj, warnings
            return self._delete(res, obj, policy), warnings

    def _delete(self, res: Resource, obj: dict[str, Any], policy: str) -> dict[str, Any]:
        """Delete with ``policy``, the caller holding the lock; runs the GC synchronously."""
        uid = obj["metadata"]["uid"]
        if policy == "Orphan":
            self._orphan_dependents(uid)
        finalizers = list(obj["metadata"].get("finalizers") or [])
        if policy == "Foreground":
            marked = self._mark_deleting(res, obj, [*finalizers, "foregroundDeletion"])
            for dep_res, dep in self.store.dependents(uid):
                self._delete(dep_res, dep, "Foreground")
            current = self.store.get(res, *_key(obj))
            if current is not None:
                remaining = [
                    f
                    for f in current["metadata"].get("finalizers") or []
                    if f != "foregroundDeletion"
                ]
                self._set_finalizers(res, current, remaining)
            return marked
        if finalizers:
            return self._mark_deleting(res, obj, finalizers)
        removed = self.store.remove(res, obj)
        self._collect_garbage(uid)
        return removed

    def _mark_deleting(
        self, res: Resource, obj: dict[str, Any], finalizers: list[str]
    ) -> dict[str, Any]:
        marked = copy.deepcopy(obj)
        meta = marked["metadata"]
        meta["deletionTimestamp"] = self.store.timestamp()
        meta["deletionGracePeriodSeconds"] = 0
        meta["finalizers"] = finalizers
        return self.store.put(res, marked)

    def _set_finalizers(self, res: Resource, obj: dict[str, Any], finalizers: list[str]) -> None:
        updated = copy.deepcopy(obj)
        if finalizers:
            updated["metadata"]["finalizers"] = finalizers
        else:
            updated["metadata"].pop("finalizers", None)
        if updated["metadata"].get("deletionTimestamp") and not finalizers:
            self.store.remove(res, updated)
            self._collect_garbage(obj["metadata"]["uid"])
        else:
            self.store.put(res, updated)

    def _orphan_dependents(self, uid: str) -> None:
        for dep_res, dep in self.store.dependents(uid):
            updated = copy.deepcopy(dep)
            refs = [r for r in dep["metadata"]["ownerReferences"] if r.get("uid") != uid]
            if refs:
                updated["metadata"]["ownerReferences"] = refs
            else:
                updated["metadata"].pop("ownerReferences")
            self.store.put(dep_res, updated)

    def _collect_garbage(self, uid: str) -> None:
        """Background GC: delete dependents whose owners are all gone."""
        for dep_res, dep in self.store.dependents(uid):
            refs = dep["metadata"]["ownerReferences"]
            if any(self.store.exists(r.get("uid", "")) for r in refs):
                self._orphan_dependents(uid)
            elif not dep["metadata"].get("deletionTimestamp"):
                self._delete(dep_res, dep, "Background")

    def delete_collection(
        self,
        res: Resource,
        namespace: str | None,
        labels: tuple[Requirement, ...],
        fields: tuple[FieldRequirement, ...],
        options: dict[str, Any],
        dry_run: bool = False,
    ) -> tuple[dict[str, Any], list[str]]:
        policy, warnings = self._policy(res, options)
        deleted: list[dict[str, Any]] = []
        with self.store.lock:
            for obj in self.store.objects(res, namespace):
                if match_labels(labels, obj["metadata"].get("labels")) and match_fields(
                    fields, obj
                ):
                    if not dry_run and not obj["metadata"].get("deletionTimestamp"):
                        obj = self._delete(res, obj, policy)
                    deleted.append(
                        {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
                    )
            rv = str(self.store.rv)
        body = {
            "kind": res.list_kind,
            "apiVersion": res.group_version,
            "metadata": {"resourceVersion": rv},
            "items": deleted,
        }
        return body, warnings


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


__all__ = ["RESOURCES", "Rest"]


def _continue_token(after: tuple[str, str], rv: str) -> str:
    data = json.dumps({"after": list(after), "rv": rv}).encode()
    return base64.urlsafe_b64encode(data).decode()


def _continue_from(token: str) -> tuple[tuple[str, str], str]:
    """The key a page starts after, and the first page's resourceVersion."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        namespace, name = data["after"]
        return (str(namespace), str(name)), str(data["rv"])
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from exc


def _partial(obj: dict[str, Any]) -> bytes:
    """An object's item in a PartialObjectMetadataList: its metadata alone."""
    item = {"kind": "PartialObjectMetadata", "apiVersion": META_V1, "metadata": obj["metadata"]}
    return compact_json(item)
