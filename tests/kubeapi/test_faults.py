"""Fault injection, the request log and the standalone server."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiException

from tests.kubeapi.clients import Clients, clients_for, raw
from tests.kubeapi.faults import Faults, parse_spec
from tests.kubeapi.harness import KubeAPI

NS = "default"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
def k8s(kubeapi: KubeAPI) -> Iterator[Clients]:
    clients = clients_for(kubeapi)
    yield clients
    clients.api.close()


# Tests of the double's own fault injection. The real backend's fault proxy uses the
# same rules and is exercised by the end-to-end fault tests.
OWN_FAULTS = pytest.mark.double_only("tests the double's own fault injection")


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def statuses(kubeapi: KubeAPI, seed: int) -> list[int]:
    kubeapi.faults("create:500=0.3,create:503=0.3", seed=seed)
    kubeapi.clear_log()
    for i in range(30):
        raw(kubeapi, "POST", CONFIGMAPS, configmap(f"s{seed}-{i}"))
    return [e["status"] for e in kubeapi.request_log]


@OWN_FAULTS
def test_faults_are_seeded_and_reproducible(kubeapi: KubeAPI) -> None:
    first = statuses(kubeapi, seed=7)
    for obj in kubeapi.objects("configmaps"):
        raw(kubeapi, "DELETE", f"{CONFIGMAPS}/{obj['metadata']['name']}")
    assert statuses(kubeapi, seed=7) == [s if s != 409 else 201 for s in first]
    assert {500, 503, 201} <= set(first)
    assert statuses(kubeapi, seed=8) != first


@OWN_FAULTS
def test_429_carries_retry_after(kubeapi: KubeAPI, k8s: Clients) -> None:
    kubeapi.faults("write/configmaps:429=1", retry_after=3)
    status, headers, body = raw(kubeapi, "POST", CONFIGMAPS, configmap("a"))
    assert (status, headers["Retry-After"], body["reason"]) == (429, "3", "TooManyRequests")
    assert body["details"]["retryAfterSeconds"] == 3
    assert raw(kubeapi, "GET", CONFIGMAPS)[0] == 200  # reads are not selected
    kubeapi.faults("")
    assert raw(kubeapi, "POST", CONFIGMAPS, configmap("a"))[0] == 201


@OWN_FAULTS
def test_dropped_connection_is_logged(kubeapi: KubeAPI) -> None:
    kubeapi.faults("get:drop=1")
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{kubeapi.url}{CONFIGMAPS}/x", timeout=5)
    entry = kubeapi.request_log[-1]
    assert (entry["status"], entry["dropped"], entry["fault"]) == (0, True, "drop")


@OWN_FAULTS
def test_injected_500_reaches_the_client(kubeapi: KubeAPI, k8s: Clients) -> None:
    kubeapi.faults("list:500=1")
    with pytest.raises(ApiException) as info:
        k8s.core.list_namespaced_config_map(NS)
    assert info.value.status == 500
    assert json.loads(info.value.body)["reason"] == "InternalError"


def test_request_log_entries(kubeapi: KubeAPI, k8s: Clients) -> None:
    kubeapi.clear_log()
    k8s.core.list_namespaced_config_map(NS, label_selector="a=b")
    [entry] = kubeapi.request_log
    assert entry["method"] == "GET" and entry["path"] == CONFIGMAPS
    assert entry["query"] == {"labelSelector": "a=b"}
    assert (entry["verb"], entry["resource"], entry["status"]) == ("list", "configmaps", 200)


def test_fault_spec_parsing() -> None:
    rules = parse_spec("write:500=0.05,get+list/jobs+pods:drop=0.5,*:delay=5ms@0.5")
    assert rules[0].verbs == {"create", "update", "patch", "delete", "deletecollection"}
    assert rules[1].resources == {"jobs", "pods"} and rules[1].action == "drop"
    assert (rules[2].delay_ms, rules[2].probability) == (5.0, 0.5)
    for bad in ("write:600=0.1", "write:500=2", "nope:500=0.1", "write500", "get:500=1xa"):
        with pytest.raises(ValueError):
            parse_spec(bad)


def test_a_limited_rule_fires_at_most_its_count() -> None:
    (rule,) = parse_spec("create/configmaps:lose=1x2")
    assert (rule.probability, rule.limit) == (1.0, 2)
    faults = Faults("create/configmaps:lose=1x2")
    lost = [faults.decide("create", "configmaps").lose for _ in range(4)]
    assert lost == [True, True, False, False]


def test_standalone_server(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.kubeapi",
            "--port",
            "0",
            "--kubeconfig",
            str(tmp_path / "kubeconfig"),
            "--request-log",
            str(log),
            "--faults",
            "*:delay=1ms",
            "--seed",
            "3",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().split()
        assert line[0] == "ready"
        url = line[1]
        with urllib.request.urlopen(f"{url}/api/v1/namespaces/default/pods") as response:
            assert json.loads(response.read())["kind"] == "PodList"
        with urllib.request.urlopen(f"{url}/_kubeapi/faults") as response:
            assert json.loads(response.read())["spec"] == "*:delay=1ms"
        entries = [json.loads(x) for x in log.read_text().splitlines()]
        assert [(e["method"], e["path"], e["status"]) for e in entries] == [
            ("GET", "/api/v1/namespaces/default/pods", 200)
        ]
        assert f"server: {url}" in (tmp_path / "kubeconfig").read_text()
    finally:
        process.terminate()
        process.wait(timeout=10)
