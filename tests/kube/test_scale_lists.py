"""LISTs in pages (`limit`/`continue`): every object once, whatever the page size,
in one request per page; no managedFields kept; each page decoded as it is read, an
item at a time, so no page is ever held whole. Run on both backends: the real
kube-apiserver is the judge of what `continue` means."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from mxgitops.errors import ClusterClientError
from mxgitops.kube import calls as kubecalls
from mxgitops.kube import cluster, listdecode, listing
from mxgitops.objects import Kind, ownership_labels, ownership_selector
from tests.kubeapi import store as store_module
from tests.kubeapi.harness import KubeAPI
from tests.kubeapi.resources import resource

NS = "ml"
OBJECTS = 23


def config_map(name: str, instance: str = "t1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "labels": ownership_labels(instance)},
        "data": {"k": "v"},
    }


@pytest.fixture
def populated(kubeapi: KubeAPI) -> KubeAPI:
    for n in range(OBJECTS):
        kubeapi.create(config_map(f"cm-{n:02d}"), NS)
    kubeapi.create(config_map("not-ours", instance="other"), NS)
    return kubeapi


@pytest.mark.parametrize("page_size", [1, 10, 23, 1000])
def test_a_list_in_pages_returns_every_object_once(populated: KubeAPI, page_size: int) -> None:
    kube = cluster.connect(kubeconfig=populated.kubeconfig)
    kube.page_size = page_size
    populated.clear_log()
    items = kube.list_all(Kind.CONFIG_MAP, ownership_selector("t1"), NS)
    names = [o["metadata"]["name"] for o in items]
    assert sorted(names) == [f"cm-{n:02d}" for n in range(OBJECTS)]
    assert len(set(names)) == OBJECTS
    assert all((o["kind"], o["apiVersion"]) == ("ConfigMap", "v1") for o in items)
    assert not any("managedFields" in o["metadata"] for o in items)
    lists = [e for e in populated.request_log if e["method"] == "GET"]
    pages = -(-OBJECTS // page_size)  # the real server may add an empty last page
    assert pages <= len(lists) <= pages + 1
    assert all(e["query"]["limit"] == str(page_size) for e in lists)
    assert "continue" not in lists[0]["query"]
    assert all(e["query"].get("continue") for e in lists[1:])


def test_live_state_of_many_objects_in_few_requests(populated: KubeAPI) -> None:
    """The default page holds `LIST_PAGE_SIZE` objects: a list of fewer is one request."""
    kube = cluster.connect(kubeconfig=populated.kubeconfig)
    populated.clear_log()
    assert len(kube.list_all(Kind.CONFIG_MAP, ownership_selector("t1"))) == OBJECTS
    assert len(populated.request_log) == 1


@pytest.mark.double_only("a continuation the server has forgotten (410) is made up here")
def test_an_expired_continuation_starts_the_list_over(populated: KubeAPI) -> None:
    kube = cluster.connect(kubeconfig=populated.kubeconfig, retry=kubecalls.RetryPolicy(attempts=1))
    kube.page_size = 10
    real_page = kube._page
    expired: list[str] = []

    def page(kind: Kind, path: str, query: dict[str, str], *rest: Any) -> Any:
        if "continue" in query and not expired:
            expired.append(query["continue"])
            raise ClusterClientError("too old", status=410, reason="Expired")
        return real_page(kind, path, query, *rest)

    kube._page = page  # type: ignore[method-assign]
    items = kube.list_all(Kind.CONFIG_MAP, ownership_selector("t1"), NS)
    assert expired and len(items) == OBJECTS
    assert len({o["metadata"]["name"] for o in items}) == OBJECTS


def batch_job(name: str) -> dict[str, Any]:
    container = {"name": "mxnet", "image": "mxnet/python:1.9.1"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": ownership_labels("t1"),
            "annotations": {"mxgitops.io/spec-hash": "abc"},
        },
        "spec": {
            "suspend": True,  # no pods on the real backend: the test reads the Job alone
            "backoffLimit": 2,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


def test_live_jobs_are_kept_without_their_pod_template(kubeapi: KubeAPI) -> None:
    """What planning reads stays (metadata, run-policy fields, status); the pod template,
    most of a Job's size and never read, goes."""
    kubeapi.create(batch_job("a"), NS)
    kube = cluster.connect(kubeconfig=kubeapi.kubeconfig)
    (job,) = kube.list_live(ownership_selector("t1")).jobs
    assert "template" not in job["spec"]
    assert (job["spec"]["suspend"], job["spec"]["backoffLimit"]) == (True, 2)
    assert job["metadata"]["annotations"]["mxgitops.io/spec-hash"] == "abc"
    assert job["metadata"]["labels"] == ownership_labels("t1")
    assert job["metadata"]["uid"] and job["metadata"]["resourceVersion"]
    assert "status" in job and (job["kind"], job["apiVersion"]) == ("Job", "batch/v1")
    # A LIST of anything else keeps the whole object.
    (whole,) = kube.list_all(Kind.JOB, ownership_selector("t1"))
    assert whole["spec"]["template"]["spec"]["containers"][0]["name"] == "mxnet"


def test_a_list_larger_than_what_is_held_at_once(kubeapi: KubeAPI) -> None:
    """A page of Jobs whose pod templates make its body many times `LIST_READ_SIZE` is
    read in chunks of at most that size, and every Job arrives whole, trimmed (that
    the chunks are decoded as they come, never joined: `test_a_list_is_never_held_whole`)."""
    padding = "x" * 16_000  # in each pod template, which planning never reads
    names = [f"big-{n:02d}" for n in range(24)]
    for name in names:
        job = batch_job(name)
        job["spec"]["template"]["spec"]["containers"][0]["env"] = [
            {"name": "PADDING", "value": padding}
        ]
        kubeapi.create(job, NS)
    kube = cluster.connect(kubeconfig=kubeapi.kubeconfig)
    reads: list[int] = []
    request = kube.api_client.request

    def spied(*args: Any, read: Callable[[Any], Any], **kwargs: Any) -> Any:
        def reading(response: Any) -> Any:
            whole = response.read

            def chunk(amount: int | None = None) -> bytes:
                data: bytes = whole(amount)
                reads.append(amount if amount is not None else -1)
                return data

            response.read = chunk
            return read(response)

        return request(*args, read=reading, **kwargs)

    kube.api_client.request = spied  # type: ignore[method-assign]
    jobs = kube.list_live(ownership_selector("t1")).jobs
    assert sorted(j["metadata"]["name"] for j in jobs) == names
    assert all("template" not in j["spec"] and j["spec"]["backoffLimit"] == 2 for j in jobs)
    assert reads and all(0 < amount <= listing.LIST_READ_SIZE for amount in reads)
    # The Jobs' page alone is more than 24 * 16 kB: read in many chunks, never whole.
    assert len(reads) >= 24 * 16_000 // listing.LIST_READ_SIZE


# -- the decoder, alone ---------------------------------------------------------------


def chunks(text: bytes, size: int) -> Callable[[], bytes]:
    pieces = iter([text[i : i + size] for i in range(0, len(text), size)])
    return lambda: next(pieces, b"")


def decoded(text: bytes, size: int) -> tuple[list[Any], dict[str, Any]]:
    items: list[Any] = []
    rest = listdecode.decode_list(chunks(text, size), items.append)
    return items, rest


LIST = {
    "kind": "JobList",
    "apiVersion": "batch/v1",
    "metadata": {"resourceVersion": "12", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"},
    "items": [
        {"metadata": {"name": "ä-ö", "labels": {"π": "∞", "emoji": "🚀"}}, "n": 12345},
        {"metadata": {"name": "b"}, "spec": {"parallelism": 1.5, "suspend": True, "x": None}},
        {"metadata": {"name": "c"}, "spec": {"quoted": '"]}, {"items": ['}},
    ],
}


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 1 << 16])
@pytest.mark.parametrize("indent", [None, 2])
def test_the_decoder_reads_any_chunking_as_one_text(size: int, indent: int | None) -> None:
    """Multi-byte characters, numbers and strings cut between chunks; white space."""
    text = json.dumps(LIST, ensure_ascii=False, indent=indent).encode()
    items, rest = decoded(text, size)
    assert items == LIST["items"]
    assert rest == {k: v for k, v in LIST.items() if k != "items"}


def test_the_decoder_takes_the_members_in_any_order() -> None:
    reordered = {"items": LIST["items"], "metadata": LIST["metadata"], "kind": "JobList"}
    items, rest = decoded(json.dumps(reordered).encode(), 5)
    assert items == LIST["items"] and rest == {"metadata": LIST["metadata"], "kind": "JobList"}
    for empty in ('{"items": []}', '{"items": null, "metadata": {}}', "{}"):
        items, _ = decoded(empty.encode(), 3)
        assert items == []


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b'{"items": [{"a": 1}',  # cut off
        b'{"items": [{"a": 1}, {"b": 2]}',
        b'{"items": [{"a": 1},]}',
        b'{"items": [], }',
        b'{"items": [] "kind": "x"}',
        b'{"items": []} {"items": []}',
        b'{"items": [1',
        b"[]",
        b'{"items": [{"a": tru}]}',
    ],
)
def test_the_decoder_refuses_what_is_not_one_json_object(text: bytes) -> None:
    with pytest.raises(ValueError):
        decoded(text, 4)


def generated_list(items: int, padding: int) -> Iterator[bytes]:
    """A list's body, produced a piece at a time: it never exists whole."""
    yield b'{"kind":"JobList","apiVersion":"batch/v1","metadata":{"continue":"more"},"items":['
    for n in range(items):
        item = {
            "metadata": {"name": f"job-{n:05d}"},
            "spec": {"template": {"padding": "x" * padding}, "suspend": False},
        }
        yield (b"," if n else b"") + json.dumps(item).encode()
    yield b"]}"


def test_a_list_is_never_held_whole() -> None:
    """8 MB of items, each trimmed as it is decoded: the decoder's peak memory is a few
    items and chunks, not the body, nor its untrimmed objects."""
    pieces = generated_list(2000, 4000)
    buffer = bytearray()

    def read() -> bytes:  # LIST_READ_SIZE at a time, as from the response
        while len(buffer) < listing.LIST_READ_SIZE:
            piece = next(pieces, b"")
            if not piece:
                break
            buffer.extend(piece)
        data = bytes(buffer[: listing.LIST_READ_SIZE])
        del buffer[: listing.LIST_READ_SIZE]
        return data

    kept: list[Any] = []

    def keep(item: Any) -> None:
        del item["spec"]["template"]
        kept.append(item)

    tracemalloc.start()
    try:
        rest = listdecode.decode_list(read, keep)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept) == 2000 and rest["metadata"] == {"continue": "more"}
    assert peak - held < 1024 * 1024, f"{peak - held} bytes at most beyond what is kept"


def test_an_item_longer_than_many_chunks_is_read_in_linear_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each failed attempt at an item cut off by the end of what was read reads twice
    as much before the next: a 2 MB item in 1 kB chunks is decoded after a dozen
    attempts, not two thousand."""
    item = {"metadata": {"name": "big"}, "data": {"blob": "y" * 2_000_000}}
    text = json.dumps({"items": [item, {"metadata": {"name": "small"}}]}).encode()
    decoder, attempts = listdecode._DECODER, []

    class Counting:
        def raw_decode(self, s: str, idx: int = 0) -> tuple[Any, int]:
            attempts.append(idx)
            return decoder.raw_decode(s, idx)

    monkeypatch.setattr(listdecode, "_DECODER", Counting())
    items, _ = decoded(text, 1024)
    assert items == [item, {"metadata": {"name": "small"}}]
    assert len(attempts) <= 16, len(attempts)  # the key, ~12 for the big item, the small one


# -- metadata-only LISTs (Services: planning reads nothing but their metadata) -----------


def scheduler_service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": ownership_labels("t1"),
            "annotations": {"mxgitops.io/spec-hash": "abc"},
        },
        "spec": {"selector": {"job": name}, "ports": [{"name": "ps-root-port", "port": 9091}]},
    }


def test_a_metadata_only_list_is_a_partial_object_metadata_list(kubeapi: KubeAPI) -> None:
    """What the server answers to `Accept: ...;as=PartialObjectMetadataList;...`: the
    list's and each item's kind and apiVersion are meta.k8s.io's, an item is its
    object's metadata alone, and pages continue as any list's do."""
    for name in ("sched-a", "sched-b"):
        kubeapi.create(scheduler_service(name), NS)
    kube = cluster.connect(kubeconfig=kubeapi.kubeconfig)
    query = {"labelSelector": ownership_selector("t1"), "limit": "1"}
    pages = []
    while True:
        items: list[Any] = []

        def read(response: Any, items: list[Any] = items) -> dict[str, Any]:
            assert response.status == 200
            assert response.headers["Content-Type"] == "application/json", response.headers
            return listdecode.decode_list(lambda: response.read(4096), items.append)

        rest = kube.api_client.request(
            "GET",
            f"/api/v1/namespaces/{NS}/services?" + urlencode(query),
            None,
            {"Accept": listing.METADATA_ONLY},
            timeout=10,
            read=read,
        )
        pages.append((rest, items))
        more = rest["metadata"].get("continue")
        if not more:
            break
        query["continue"] = more
    assert [len(items) for _, items in pages] == [1, 1]
    for rest, (item,) in pages:
        assert (rest["kind"], rest["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
        assert rest["metadata"]["resourceVersion"]
        assert set(item) == {"kind", "apiVersion", "metadata"}
        assert (item["kind"], item["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
        assert item["metadata"]["labels"] == ownership_labels("t1")
        assert item["metadata"]["uid"] and item["metadata"]["creationTimestamp"]
    assert [i["metadata"]["name"] for _, (i,) in pages] == ["sched-a", "sched-b"]


def test_live_services_are_their_metadata(kubeapi: KubeAPI) -> None:
    """list_live reads Services metadata-only: each kept as a Service of v1 with its
    whole metadata (but managedFields) and nothing else."""
    kubeapi.create(scheduler_service("sched-a"), NS)
    kube = cluster.connect(kubeconfig=kubeapi.kubeconfig)
    kubeapi.clear_log()
    (service,) = kube.list_live(ownership_selector("t1")).services
    assert set(service) == {"kind", "apiVersion", "metadata"}
    assert (service["kind"], service["apiVersion"]) == ("Service", "v1")
    meta = service["metadata"]
    assert (meta["name"], meta["namespace"]) == ("sched-a", NS)
    assert meta["labels"] == ownership_labels("t1")
    assert meta["annotations"]["mxgitops.io/spec-hash"] == "abc"
    assert meta["uid"] and meta["resourceVersion"] and "managedFields" not in meta
    lists = [e for e in kubeapi.request_log if e["method"] == "GET"]
    assert len(lists) == 4  # Jobs, Services, pods, JobSets (none served here: 404, no CRD)
    # A LIST of anything else, or of Services not for planning, keeps the whole object.
    (whole,) = kube.list_all(Kind.SERVICE, ownership_selector("t1"))
    assert whole["spec"]["ports"][0]["port"] == 9091


def test_listed_objects_share_their_keys_and_short_strings(populated: KubeAPI) -> None:
    """Decoded item by item, the objects of a list still share one string per key and
    per short value (a label's), as one json.loads of a whole page shared its keys."""
    kube = cluster.connect(kubeconfig=populated.kubeconfig)
    a, b, *_ = kube.list_all(Kind.CONFIG_MAP, ownership_selector("t1"), NS)
    keys = {k: k for k in a["metadata"]}
    assert all(keys[k] is k for k in b["metadata"] if k in keys)
    labels_a, labels_b = a["metadata"]["labels"], b["metadata"]["labels"]
    assert all(labels_a[k] is labels_b[k] for k in labels_a)


@pytest.mark.double_only("how the double cuts its pages: the real server pages from etcd")
def test_the_double_sorts_a_kind_once_for_all_the_pages_of_a_list(
    populated: KubeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each page cut from one sort, not each from a sort of every object: a LIST of
    many pages stays N log N, so bench floors at 10,000 jobs measure mxgitops."""
    store = populated.server.store
    sorts: list[int] = []
    real_sorted = sorted

    def counted(*args: Any, **kwargs: Any) -> Any:
        sorts.append(1)
        return real_sorted(*args, **kwargs)

    monkeypatch.setattr(store_module, "sorted", counted, raising=False)
    kube = cluster.connect(kubeconfig=populated.kubeconfig)
    kube.page_size = 5
    assert len(kube.list_all(Kind.CONFIG_MAP, ownership_selector("t1"), NS)) == OBJECTS
    monkeypatch.undo()
    assert len(sorts) == 1  # five pages
    populated.create(config_map("cm-new"), NS)  # a write of the kind: sorted again
    keys, _ = store.ordered(resource("configmaps"))
    assert (NS, "cm-new") in keys and keys == sorted(keys)
