"""A running job's life on the real node, driven by commits: suspended and resumed in
place (its pods go and come back under the same runtime id), replaced by a changed
spec (the old runtime's pod is gone before any pod of the new runtime exists), pruned by
a removed manifest (every object and pod of it gone; two other jobs stay, so the
prune guards, which refuse to empty a repository's jobs, let it through).

The container traps SIGTERM and exits at once, as a well-behaved trainer does, so
each step takes seconds, not the 30 s grace period.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.images import TOOLBOX_IMAGE
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.node import NS, cli, pods_of, sync_args

LOOP = "trap 'echo stopping; exit 0' TERM; echo started {tag}; while true; do sleep 1; done"


def sleeper(tag: str, suspend: bool = False, name: str = "sleeper") -> str:
    container = {
        "name": "mxnet",
        "image": TOOLBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", LOOP.format(tag=tag)],
    }
    return yaml.safe_dump(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MXJob",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "runPolicy": {"suspend": suspend},
                "mxReplicaSpecs": {
                    "Worker": {"replicas": 1, "template": {"spec": {"containers": [container]}}}
                },
            },
        }
    )


def running_pod(cluster: RealCluster) -> dict[str, Any] | None:
    pods = [p for p in pods_of(cluster, "sleeper") if p["status"].get("phase") == "Running"]
    return pods[0] if len(pods) == 1 and not pods[0]["metadata"].get("deletionTimestamp") else None


def runtime_of(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["labels"]["runtime_id"])


def batch_jobs(cluster: RealCluster) -> list[dict[str, Any]]:
    return [j for j in cluster.objects("jobs", NS) if j["metadata"]["name"].startswith("sleeper-")]


class PodEvents:
    """Every pod event in the namespace, in the API server's order, from now on."""

    def __init__(self, cluster: RealCluster) -> None:
        listed = cluster.rest.get(f"/api/v1/namespaces/{NS}/pods")
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._stop = threading.Event()
        version = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, args=(cluster, version), daemon=True)
        self._thread.start()

    def _run(self, cluster: RealCluster, version: str) -> None:
        path = f"/api/v1/namespaces/{NS}/pods"
        for event in cluster.rest.watch(path, resourceVersion=version, timeoutSeconds=25):
            self.events.append((event["type"], event["object"]))
            if self._stop.is_set():
                return

    def stop(self) -> None:
        self._stop.set()


@pytest.fixture
def remote(make_git_remote: Callable[..., GitRemote]) -> Iterator[GitRemote]:
    files = {f"jobs/{name}.yaml": sleeper("v1", name=name) for name in ("keeper-a", "keeper-b")}
    yield make_git_remote("jobs", files={**files, "jobs/sleeper.yaml": sleeper("v1")})


def test_suspend_resume_replace_and_prune_a_running_job(
    node_cluster: RealCluster,
    remote: GitRemote,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    args = sync_args(remote, node_cluster, tmp_path / "cache")

    def sync_commit(files: dict[str, str | None], message: str) -> None:
        remote.commit(files, message)
        cli("sync", *args)

    cli("sync", *args)
    first = wait_for("the sleeper's pod to run", lambda: running_pod(node_cluster), timeout=60)
    runtime = runtime_of(first)
    names = {j["metadata"]["name"] for j in batch_jobs(node_cluster)}

    # Suspend in place: same batch Jobs, suspended; the pod goes.
    sync_commit({"jobs/sleeper.yaml": sleeper("v1", suspend=True)}, "suspend")
    assert {j["metadata"]["name"] for j in batch_jobs(node_cluster)} == names
    assert all(j["spec"]["suspend"] for j in batch_jobs(node_cluster))
    wait_for("the suspended job's pod to go", lambda: not pods_of(node_cluster, "sleeper"))

    # Resume in place: a new pod, same runtime.
    sync_commit({"jobs/sleeper.yaml": sleeper("v1")}, "resume")
    resumed = wait_for("the resumed pod to run", lambda: running_pod(node_cluster), timeout=60)
    assert runtime_of(resumed) == runtime
    assert resumed["metadata"]["uid"] != first["metadata"]["uid"]
    assert {j["metadata"]["name"] for j in batch_jobs(node_cluster)} == names

    # Replace: a changed command is a new runtime. The old runtime's pod is gone (its
    # DELETED event) before any pod of the new runtime exists: the sync deletes the old
    # batch Jobs in the foreground and creates the new ones once they are gone.
    events = PodEvents(node_cluster)
    sync_commit({"jobs/sleeper.yaml": sleeper("v2")}, "change the command")

    def new_runtime_runs() -> dict[str, Any] | None:
        pod = running_pod(node_cluster)
        return pod if pod is not None and runtime_of(pod) != runtime else None

    replaced = wait_for("the new runtime's pod to run", new_runtime_runs, timeout=90)
    new_runtime = runtime_of(replaced)
    assert all(runtime_of(p) == new_runtime for p in pods_of(node_cluster, "sleeper"))
    events.stop()
    order = [
        (
            kind,
            pod["metadata"]["name"],
            pod["status"].get("phase"),
            bool(pod["metadata"].get("deletionTimestamp")),
        )
        for kind, pod in events.events
    ]
    sleeper_events = [
        (i, kind, pod)
        for i, (kind, pod) in enumerate(events.events)
        if pod["metadata"].get("labels", {}).get("job-name", "").startswith("sleeper-")
    ]
    old_gone = max(
        i for i, kind, pod in sleeper_events if runtime_of(pod) == runtime and kind == "DELETED"
    )
    new_exists = min(i for i, _, pod in sleeper_events if runtime_of(pod) == new_runtime)
    assert old_gone < new_exists, order
    assert all(runtime_of(j) == new_runtime for j in batch_jobs(node_cluster))
    log = node_cluster.raw(
        "GET", f"/api/v1/namespaces/{NS}/pods/{replaced['metadata']['name']}/log"
    )
    assert "started v2" in str(log[2]), log

    # Prune: the manifest removed, every object and pod of the job goes.
    sync_commit({"jobs/sleeper.yaml": None}, "remove the sleeper")
    wait_for("the pruned job's batch Jobs to go", lambda: not batch_jobs(node_cluster))
    wait_for("the pruned job's pods to go", lambda: not pods_of(node_cluster, "sleeper"))
