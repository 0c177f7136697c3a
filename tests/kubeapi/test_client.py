"""The official Python client against the API double: verbs, metadata, errors, selectors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import ApiException

from tests.kubeapi.clients import Clients, clients_for, error_body, job_manifest, raw
from tests.kubeapi.harness import KubeAPI

NS = "default"
# The real server's root-CA publisher puts this ConfigMap in every namespace.
ROOT_CA = "kube-root-ca.crt"


@pytest.fixture
def k8s(kubeapi: KubeAPI) -> Iterator[Clients]:
    clients = clients_for(kubeapi)
    yield clients
    clients.api.close()


def status_of(call: Any, *args: Any, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as info:
        call(*args, **kwargs)
    return info.value.status, error_body(info.value)


def configmap(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}},
        "data": {"k": "v"},
    }


@pytest.mark.double_only("reads the double's resourceVersion counter")
def test_create_sets_metadata_and_job_defaults(k8s: Clients, kubeapi: KubeAPI) -> None:
    before = kubeapi.resource_version
    job = k8s.batch.create_namespaced_job(NS, job_manifest("train")).to_dict()
    meta, spec = job["metadata"], job["spec"]
    assert meta["namespace"] == NS and meta["generation"] == 1 and meta["uid"]
    assert int(meta["resource_version"]) == before + 1
    assert meta["creation_timestamp"] is not None
    uid = meta["uid"]
    assert spec["selector"] == {
        "match_labels": {"batch.kubernetes.io/controller-uid": uid},
        "match_expressions": None,
    }
    assert spec["template"]["metadata"]["labels"] == {
        "app": "mx",
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "train",
        "controller-uid": uid,
        "job-name": "train",
    }
    assert (spec["completions"], spec["parallelism"], spec["backoff_limit"]) == (1, 1, 0)
    assert (spec["completion_mode"], spec["suspend"]) == ("NonIndexed", False)
    assert spec["pod_replacement_policy"] == "Failed"
    container = spec["template"]["spec"]["containers"][0]
    assert container["termination_message_policy"] == "File"
    assert container["image_pull_policy"] == "IfNotPresent"
    default = k8s.batch.create_namespaced_job(
        NS, {**job_manifest("b"), "spec": {"template": job_manifest("b")["spec"]["template"]}}
    )
    assert default.spec.backoff_limit == 6
    assert default.spec.pod_replacement_policy == "TerminatingOrFailed"


@pytest.mark.double_only(
    "the double's resourceVersion is one counter by design; etcd's revision moves with "
    "every other writer"
)
def test_resource_version_is_one_counter(k8s: Clients, kubeapi: KubeAPI) -> None:
    a = k8s.core.create_namespaced_config_map(NS, configmap("a"))
    b = k8s.batch.create_namespaced_job(NS, job_manifest("b"))
    c = k8s.core.create_namespaced_config_map("other", configmap("c"))
    rvs = [int(x.metadata.resource_version) for x in (a, b, c)]
    assert rvs == [rvs[0], rvs[0] + 1, rvs[0] + 2]
    listed = k8s.core.list_config_map_for_all_namespaces()
    assert listed.metadata.resource_version == str(kubeapi.resource_version)
    assert sorted(i.metadata.name for i in listed.items) == ["a", "c"]


def test_typed_list_items_have_no_kind(kubeapi: KubeAPI, k8s: Clients) -> None:
    k8s.core.create_namespaced_config_map(NS, configmap("a"))
    _, _, body = raw(kubeapi, "GET", "/api/v1/namespaces/default/configmaps")
    assert body["kind"] == "ConfigMapList" and body["apiVersion"] == "v1"
    assert "kind" not in body["items"][0] and "apiVersion" not in body["items"][0]


def test_generate_name(k8s: Clients) -> None:
    body = configmap("")
    body["metadata"] = {"generateName": "cfg-"}
    created = k8s.core.create_namespaced_config_map(NS, body)
    assert created.metadata.name.startswith("cfg-") and len(created.metadata.name) == 9
    assert created.metadata.generate_name == "cfg-"


def test_not_found_and_already_exists(k8s: Clients) -> None:
    code, body = status_of(k8s.core.read_namespaced_pod, "x", NS)
    assert (code, body["reason"], body["message"]) == (404, "NotFound", 'pods "x" not found')
    assert body["details"] == {"name": "x", "kind": "pods"}
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == 404
    k8s.batch.create_namespaced_job(NS, job_manifest("foo"))
    code, body = status_of(k8s.batch.create_namespaced_job, NS, job_manifest("foo"))
    assert (code, body["reason"]) == (409, "AlreadyExists")
    assert body["message"] == 'jobs.batch "foo" already exists'
    assert body["details"] == {"name": "foo", "group": "batch", "kind": "jobs"}
    code, body = status_of(k8s.batch.delete_namespaced_job, "nope", NS)
    assert (code, body["message"]) == (404, 'jobs.batch "nope" not found')


@pytest.mark.double_only(
    "the real job controller writes the Job between the test's read and its replace (409)"
)
def test_update_conflict_and_generation(k8s: Clients) -> None:
    job = k8s.batch.create_namespaced_job(NS, job_manifest("x"))
    job.metadata.labels["extra"] = "1"
    updated = k8s.batch.replace_namespaced_job("x", NS, job)
    assert updated.metadata.generation == 1  # metadata only
    job.metadata.labels["extra"] = "2"
    code, body = status_of(k8s.batch.replace_namespaced_job, "x", NS, job)
    assert (code, body["reason"]) == (409, "Conflict")
    assert body["message"] == (
        'Operation cannot be fulfilled on jobs.batch "x": the object has been modified; please '
        "apply your changes to the latest version and try again"
    )
    suspended = k8s.batch.patch_namespaced_job("x", NS, {"spec": {"suspend": True}})
    assert suspended.metadata.generation == 2
    unchanged = k8s.batch.patch_namespaced_job("x", NS, {"spec": {"suspend": True}})
    assert unchanged.metadata.resource_version == suspended.metadata.resource_version


def test_immutable_template_and_selector(k8s: Clients) -> None:
    k8s.batch.create_namespaced_job(NS, job_manifest("x"))
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "mxnet", "image": "y"}]}}}}
    code, body = status_of(k8s.batch.patch_namespaced_job, "x", NS, patch)
    assert (code, body["reason"]) == (422, "Invalid")
    assert body["message"].startswith('Job.batch "x" is invalid: spec.template: Invalid value: ')
    assert body["message"].endswith(": field is immutable")
    assert body["details"]["causes"][0]["field"] == "spec.template"
    assert body["details"]["causes"][0]["reason"] == "FieldValueInvalid"
    selector = {"spec": {"selector": {"matchLabels": {"a": "b"}}}}
    code, body = status_of(k8s.batch.patch_namespaced_job, "x", NS, selector)
    assert code == 422 and "spec.selector: Invalid value" in body["message"]


def test_patch_flavours(k8s: Clients) -> None:
    k8s.batch.create_namespaced_job(NS, job_manifest("x"))
    merged = k8s.batch.patch_namespaced_job(
        "x", NS, {"metadata": {"labels": {"b": "2"}, "annotations": {"n": "1"}}}
    )
    assert merged.metadata.labels == {"app": "mx", "b": "2"}
    json_patched = k8s.batch.patch_namespaced_job(
        "x", NS, [{"op": "remove", "path": "/metadata/labels/b"}]
    )
    assert json_patched.metadata.labels == {"app": "mx"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]},
    }
    k8s.core.create_namespaced_pod(NS, pod)
    strategic = k8s.core.patch_namespaced_pod(
        "p", NS, {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}
    )
    assert [(c.name, c.image) for c in strategic.spec.containers] == [("a", "a:1"), ("b", "b:2")]
    code, body = status_of(
        k8s.core.patch_namespaced_pod,
        "p",
        NS,
        {"spec": {"containers": [{"name": "c", "image": "c"}]}},
    )
    assert code == 422 and "pod updates may not add or remove containers" in body["message"]


@pytest.mark.double_only(
    "writes a Job's status, which the real job controller owns and rewrites concurrently"
)
def test_status_subresource(k8s: Clients) -> None:
    k8s.batch.create_namespaced_job(NS, job_manifest("x"))
    ignored = k8s.batch.patch_namespaced_job("x", NS, {"status": {"active": 3}})
    assert ignored.status.active is None
    done = k8s.batch.patch_namespaced_job_status(
        "x", NS, {"status": {"active": 1}, "metadata": {"labels": {"ignored": "y"}}}
    )
    # The spec stays, but labels sent with a status update are taken (as on the real server).
    assert done.status.active == 1 and done.metadata.labels["ignored"] == "y"
    assert k8s.batch.read_namespaced_job_status("x", NS).status.active == 1


def test_namespace_mismatch_and_bad_names(k8s: Clients) -> None:
    body = configmap("a")
    body["metadata"]["namespace"] = "other"
    code, err = status_of(k8s.core.create_namespaced_config_map, NS, body)
    assert (code, err["reason"]) == (400, "BadRequest")
    assert err["message"] == (
        "the namespace of the provided object does not match the namespace sent on the request"
    )
    code, err = status_of(k8s.core.create_namespaced_config_map, NS, configmap("Bad_Name"))
    assert code == 422
    assert err["message"].startswith(
        'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase '
        "RFC 1123 subdomain must consist of"
    )
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "1svc"},
        "spec": {"ports": [{"port": 80}]},
    }
    code, err = status_of(k8s.core.create_namespaced_service, NS, svc)
    assert code == 422 and "a DNS-1035 label must consist of" in err["message"]
    long_name = "j" * 64
    code, err = status_of(k8s.batch.create_namespaced_job, NS, job_manifest(long_name))
    assert code == 422
    assert err["message"] == (
        f'Job.batch "{long_name}" is invalid: spec.template.labels: Invalid value: "{long_name}": '
        "must be no more than 63 characters"
    )


def test_field_validation_modes(k8s: Clients, kubeapi: KubeAPI) -> None:
    body = job_manifest("x")
    body["spec"]["foo"] = 1
    jobs = "/apis/batch/v1/namespaces/default/jobs"
    code, _, err = raw(kubeapi, "POST", jobs + "?fieldValidation=Strict", body)
    assert (code, err["reason"]) == (400, "BadRequest")
    assert err["message"] == (
        'Job in version "v1" cannot be handled as a Job: strict decoding error: '
        'unknown field "spec.foo"'
    )
    status, headers, _ = raw(kubeapi, "POST", jobs, body)  # the default is Warn
    assert status == 201
    assert headers["Warning"] == '299 - "unknown field \\"spec.foo\\""'
    assert "foo" not in kubeapi.get("jobs", "x")["spec"]  # type: ignore[index]
    body["metadata"]["name"] = "y"
    _, headers, _ = raw(kubeapi, "POST", jobs + "?fieldValidation=Ignore", body)
    assert "Warning" not in headers


def test_invalid_job_is_422_with_causes(k8s: Clients, kubeapi: KubeAPI) -> None:
    body = job_manifest("x")
    body["spec"]["template"]["spec"]["containers"] = []
    body["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    del body["spec"]["podFailurePolicy"]
    code, err = status_of(k8s.batch.create_namespaced_job, NS, body)
    assert (code, err["reason"]) == (422, "Invalid")
    assert err["message"] == (
        'Job.batch "x" is invalid: [spec.template.spec.containers: Required value, '
        'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"]'
    )
    causes = err["details"]["causes"]
    assert causes[0] == {
        "reason": "FieldValueRequired",
        "message": "Required value",
        "field": "spec.template.spec.containers",
    }
    assert causes[1]["reason"] == "FieldValueRequired"
    typed = job_manifest("t")
    typed["spec"]["backoffLimit"] = "six"
    code, _, err = raw(kubeapi, "POST", "/apis/batch/v1/namespaces/default/jobs", typed)
    assert code == 400 and err["message"] == (
        'Job in version "v1" cannot be handled as a Job: json: cannot unmarshal string into Go '
        "struct field JobSpec.spec.backoffLimit of type int32"
    )


def test_label_and_field_selectors(k8s: Clients) -> None:
    for name, labels in {
        "a": {"tier": "worker", "gpu": "1"},
        "b": {"tier": "server"},
        "c": {"other": "x"},
    }.items():
        k8s.core.create_namespaced_config_map(NS, configmap(name, labels))

    def names(**kwargs: str) -> list[str]:
        items = k8s.core.list_namespaced_config_map(NS, **kwargs).items
        return sorted(i.metadata.name for i in items if i.metadata.name != ROOT_CA)

    assert names(label_selector="tier=worker") == ["a"]
    assert names(label_selector="tier==worker") == ["a"]
    assert names(label_selector="tier!=worker") == ["b", "c"]
    assert names(label_selector="tier in (worker, server)") == ["a", "b"]
    assert names(label_selector="tier notin (worker)") == ["b", "c"]
    assert names(label_selector="gpu") == ["a"]
    assert names(label_selector="!gpu") == ["b", "c"]
    assert names(label_selector="tier,!gpu") == ["b"]
    assert names(field_selector="metadata.name=b") == ["b"]
    assert names(field_selector="metadata.name!=b,metadata.namespace==default") == ["a", "c"]
    code, err = status_of(k8s.core.list_namespaced_config_map, NS, label_selector="tier in (a")
    assert (code, err["reason"]) == (400, "BadRequest")
    assert err["message"] == "unable to parse requirement: found '', expected: ',' or ')'"
    code, err = status_of(k8s.core.list_namespaced_config_map, NS, label_selector="x=a b")
    assert err["message"] == "found 'b', expected: ',' or 'end of string'"
    code, err = status_of(k8s.core.list_namespaced_config_map, NS, field_selector="spec.x=1")
    assert (code, err["message"]) == (
        400,
        '"spec.x" is not a known field selector: only "metadata.name", "metadata.namespace"',
    )


def test_delete_collection(k8s: Clients) -> None:
    for name in "abc":
        k8s.core.create_namespaced_config_map(
            NS, configmap(name, {"g": "1" if name != "c" else "2"})
        )
    deleted = k8s.core.delete_collection_namespaced_config_map(NS, label_selector="g=1")
    assert deleted.status is None  # the client decodes the ConfigMapList as a V1Status
    left = k8s.core.list_namespaced_config_map(NS).items
    assert [i.metadata.name for i in left if i.metadata.name != ROOT_CA] == ["c"]


def test_leases_create_on_update(k8s: Clients) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "mxgitops"},
        "spec": {"holderIdentity": "me", "leaseDurationSeconds": 60},
    }
    created = k8s.coordination.create_namespaced_lease(NS, lease)
    created.spec.holder_identity = "you"
    k8s.coordination.replace_namespaced_lease("mxgitops", NS, created)
    created.spec.holder_identity = "them"
    code, err = status_of(k8s.coordination.replace_namespaced_lease, "mxgitops", NS, created)
    assert code == 409 and 'leases.coordination.k8s.io "mxgitops"' in err["message"]
    lease["metadata"]["name"] = "fresh"
    _, status, _ = k8s.coordination.replace_namespaced_lease_with_http_info("fresh", NS, lease)
    assert status == 201


def test_service_defaults(k8s: Clients) -> None:
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "sched"},
        "spec": {"selector": {"a": "b"}, "ports": [{"name": "ps-root-port", "port": 9091}]},
    }
    created = k8s.core.create_namespaced_service(NS, svc)
    assert created.spec.type == "ClusterIP" and created.spec.session_affinity == "None"
    assert created.spec.cluster_ip and created.spec.cluster_ips == [created.spec.cluster_ip]
    port = created.spec.ports[0]
    assert (port.protocol, port.target_port) == ("TCP", 9091)
    created_ip = created.spec.cluster_ip
    created.metadata.labels = {"x": "y"}
    created.spec.cluster_ip = None
    created.spec.cluster_ips = None
    replaced = k8s.core.replace_namespaced_service("sched", NS, created)
    assert replaced.spec.cluster_ip == created_ip


def test_events_and_pod_defaults(k8s: Clients) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a", "image": "a"}]},
    }
    created = k8s.core.create_namespaced_pod(NS, pod)
    assert created.spec.restart_policy == "Always"
    assert created.status.phase == "Pending" and created.status.qos_class == "BestEffort"
    assert created.spec.containers[0].image_pull_policy == "Always"
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": NS},
        "reason": "Synced",
        "message": "hello",
        "type": "Normal",
    }
    assert k8s.core.create_namespaced_event(NS, event).reason == "Synced"
