"""The LISTs of a sync's live state are in flight at once: the batch Jobs, Services and
pods are asked for together, so the server's time producing one page, and the wire's,
is spent while the client decodes another (docs/guides/scale.md). Shown by a LIST of
batch Jobs that hangs: the other two still reach the server meanwhile, and once the
hang is let go (its connection closed unanswered, the request retried) the sync reads
every object, each list whole. Run on both backends: the real one's faults come from
its proxy, and either request log says what reached the server."""

from __future__ import annotations

import threading
import time
from typing import Any

from mxgitops.kube import cluster
from mxgitops.objects import LiveObjects, ownership_labels, ownership_selector
from tests.kubeapi.harness import KubeAPI

NS = "ml"
DEADLINE = 30  # seconds any wait here may take, on a loaded machine


def _service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NS, "labels": ownership_labels("t1")},
        "spec": {"clusterIP": "None", "selector": {"a": "b"}, "ports": [{"port": 9091}]},
    }


def _listed(api: KubeAPI) -> set[str]:
    """The resources whose LIST reached the server (a hanging one too)."""
    return {e["resource"] for e in api.request_log if e["method"] == "GET"}


def test_the_lists_of_live_state_are_made_at_once(kubeapi: KubeAPI) -> None:
    for name in ("svc-a", "svc-b"):
        kubeapi.create(_service(name), NS)
    kubeapi.faults("list/jobs:hang=1x1")  # the first LIST of batch Jobs hangs, its retry not
    # Connected after the faults are set: on the real backend they put a proxy in the way.
    kube = cluster.connect(kubeconfig=kubeapi.kubeconfig, request_timeout=DEADLINE)
    read: list[LiveObjects] = []
    failed: list[BaseException] = []

    def list_live() -> None:
        try:
            read.append(kube.list_live(ownership_selector("t1")))
        except BaseException as exc:  # raised again below, in the test's thread
            failed.append(exc)

    reader = threading.Thread(target=list_live, daemon=True)
    reader.start()
    deadline = time.monotonic() + DEADLINE
    while not {"jobs", "services", "pods"} <= _listed(kubeapi):
        assert time.monotonic() < deadline, f"only {_listed(kubeapi)} listed while jobs hang"
        assert reader.is_alive(), failed
        time.sleep(0.01)
    assert any(e["fault"] == "hang" for e in kubeapi.request_log)  # still hanging meanwhile
    kubeapi.faults("")  # let the hanging LIST go: closed unanswered, then retried
    reader.join(DEADLINE)
    assert not failed, failed
    [live] = read
    assert sorted(s["metadata"]["name"] for s in live.services) == ["svc-a", "svc-b"]
    assert live.jobs == () and live.pods == ()
