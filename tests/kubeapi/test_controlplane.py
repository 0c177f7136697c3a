"""The simulated job controller and kubelet, observed through the Python client."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.controlplane.harness import wait_for
from tests.kubeapi.clients import Clients, clients_for, job_manifest
from tests.kubeapi.harness import KubeAPI

NS = "default"

# The double recreates a failed pod at its next step; the real job controller only
# after its pod failure backoff (10 s, doubling), which a test would wait out.
BACKOFF = (
    "a failed pod is recreated after the real job controller's backoff (10 s, doubling): wall time"
)


@pytest.fixture
def k8s(kubeapi: KubeAPI) -> Iterator[Clients]:
    clients = clients_for(kubeapi)
    yield clients
    clients.api.close()


def conditions(k8s: Clients, name: str) -> dict[str, tuple[str, str]]:
    job = k8s.batch.read_namespaced_job_status(name, NS)
    return {c.type: (c.status, c.reason) for c in job.status.conditions or []}


def test_controller_creates_the_pod_of_a_job(k8s: Clients, kubeapi: KubeAPI) -> None:
    job = k8s.batch.create_namespaced_job(NS, job_manifest("train"))
    created = kubeapi.run_job_controller()
    assert len(created) == 1
    assert kubeapi.run_job_controller() == []  # never more than needed
    pod = k8s.core.read_namespaced_pod(created[0]["metadata"]["name"], NS)
    assert re.fullmatch(r"train-[a-z0-9]{5}", pod.metadata.name)
    assert pod.metadata.generate_name == "train-"
    uid = job.metadata.uid
    assert pod.metadata.labels == {
        "app": "mx",
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "train",
        "controller-uid": uid,
        "job-name": "train",
    }
    ref = pod.metadata.owner_references[0]
    assert (ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == (
        "Job",
        "train",
        uid,
        True,
        True,
    )
    status = k8s.batch.read_namespaced_job_status("train", NS).status
    assert status.active == 1 and status.start_time is not None


def test_suspended_jobs_get_no_pods(k8s: Clients, kubeapi: KubeAPI) -> None:
    k8s.batch.create_namespaced_job(NS, job_manifest("train", suspend=True))
    assert kubeapi.run_job_controller() == []
    assert conditions(k8s, "train")["Suspended"] == ("True", "JobSuspended")
    k8s.batch.patch_namespaced_job("train", NS, {"spec": {"suspend": False}})
    assert len(kubeapi.run_job_controller()) == 1
    assert conditions(k8s, "train")["Suspended"] == ("False", "JobResumed")


def test_job_completes(k8s: Clients, kubeapi: KubeAPI) -> None:
    k8s.batch.create_namespaced_job(NS, job_manifest("train"))
    kubeapi.run_job_controller()
    [running] = kubeapi.kubelet(job="train", phase="Running")
    assert running["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    # The real job controller counts ready pods a second after they change (its batch
    # period); the harness's settle does not wait for a count mxgitops never reads.
    wait_for(
        "the Job to count its ready pod",
        lambda: k8s.batch.read_namespaced_job_status("train", NS).status.ready == 1,
    )
    [done] = kubeapi.kubelet(running["metadata"]["name"], phase="Succeeded")
    terminated = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    status = k8s.batch.read_namespaced_job_status("train", NS).status
    assert (status.succeeded, status.active, status.failed) == (1, None, None)
    assert status.completion_time is not None
    assert conditions(k8s, "train") == {
        "SuccessCriteriaMet": ("True", "CompletionsReached"),
        "Complete": ("True", "CompletionsReached"),
    }


def test_oom_killed_fails_the_job_through_pod_failure_policy(
    k8s: Clients, kubeapi: KubeAPI
) -> None:
    k8s.batch.create_namespaced_job(NS, job_manifest("train"))
    [pod] = kubeapi.run_job_controller()
    kubeapi.kubelet(pod["metadata"]["name"], phase="Running")
    [failed] = kubeapi.kubelet(
        pod["metadata"]["name"], phase="Failed", exit_code=137, reason="OOMKilled"
    )
    state = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (state["exitCode"], state["reason"]) == (137, "OOMKilled")
    assert failed["status"]["phase"] == "Failed"
    # 137 is outside the FailJob rule (1-127): counted, and backoffLimit 0 is exceeded.
    assert conditions(k8s, "train")["Failed"] == ("True", "BackoffLimitExceeded")


def test_exit_1_fails_the_job_with_pod_failure_policy(k8s: Clients, kubeapi: KubeAPI) -> None:
    k8s.batch.create_namespaced_job(NS, job_manifest("train", backoffLimit=5))
    [pod] = kubeapi.run_job_controller()
    name = pod["metadata"]["name"]
    kubeapi.kubelet(name, phase="Failed", exit_code=1, message="loss is NaN")
    job = k8s.batch.read_namespaced_job_status("train", NS)
    failed = next(c for c in job.status.conditions if c.type == "Failed")
    assert failed.reason == "PodFailurePolicy"
    assert failed.message == (
        f"Container mxnet for pod default/{name} failed with exit code 1 matching FailJob rule "
        "at index 0"
    )
    assert job.status.failed == 1
    assert kubeapi.run_job_controller() == []  # a failed job gets no new pods


@pytest.mark.double_only(BACKOFF)
def test_backoff_limit_with_restart_policy_never(k8s: Clients, kubeapi: KubeAPI) -> None:
    body = job_manifest("train", backoffLimit=2)
    del body["spec"]["podFailurePolicy"]
    k8s.batch.create_namespaced_job(NS, body)
    for attempt in range(3):
        [pod] = kubeapi.run_job_controller()
        kubeapi.kubelet(pod["metadata"]["name"], phase="Failed", exit_code=2)
        status = k8s.batch.read_namespaced_job_status("train", NS).status
        assert status.failed == attempt + 1
    assert conditions(k8s, "train")["Failed"] == ("True", "BackoffLimitExceeded")
    assert len(kubeapi.objects("pods")) == 3


@pytest.mark.double_only(BACKOFF)
def test_ignore_rule_does_not_count(k8s: Clients, kubeapi: KubeAPI) -> None:
    body = job_manifest("train")
    body["spec"]["podFailurePolicy"]["rules"].insert(
        0, {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [42]}}
    )
    k8s.batch.create_namespaced_job(NS, body)
    [pod] = kubeapi.run_job_controller()
    kubeapi.kubelet(pod["metadata"]["name"], phase="Failed", exit_code=42)
    assert conditions(k8s, "train") == {}
    assert len(kubeapi.run_job_controller()) == 1  # replaced


def test_on_failure_restarts_in_place(k8s: Clients, kubeapi: KubeAPI) -> None:
    body = job_manifest("train", backoffLimit=2)
    del body["spec"]["podFailurePolicy"]
    body["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    k8s.batch.create_namespaced_job(NS, body)
    [pod] = kubeapi.run_job_controller()
    name = pod["metadata"]["name"]
    kubeapi.kubelet(name, phase="Running")
    [restarted] = kubeapi.kubelet(name, phase="Failed", exit_code=1, reason="Error")
    cs = restarted["status"]["containerStatuses"][0]
    assert restarted["status"]["phase"] == "Running"
    assert cs["restartCount"] == 1
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert "Failed" not in conditions(k8s, "train")
    kubeapi.kubelet(name, phase="Failed", exit_code=1, restart_state="running")
    assert conditions(k8s, "train")["Failed"] == ("True", "BackoffLimitExceeded")


@pytest.mark.double_only(
    "moves the double's clock; the real job controller's deadline runs on wall time"
)
def test_active_deadline(k8s: Clients, kubeapi: KubeAPI) -> None:
    k8s.batch.create_namespaced_job(NS, job_manifest("train", activeDeadlineSeconds=60))
    kubeapi.run_job_controller()
    kubeapi.kubelet(job="train", phase="Running")
    kubeapi.advance_clock(61)
    kubeapi.run_job_controller()
    assert conditions(k8s, "train")["Failed"] == ("True", "DeadlineExceeded")
    assert kubeapi.objects("pods") == []  # the active pod was terminated


@pytest.mark.double_only("moves the double's clock")
def test_timestamps_follow_the_clock(kubeapi: KubeAPI) -> None:
    """The creation and deletion timestamps, formatted once a second, follow a moved clock."""
    from datetime import UTC, datetime, timedelta

    def stamp(text: str) -> datetime:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)

    def configmap(name: str) -> dict[str, object]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}

    before = kubeapi.create(configmap("before"))["metadata"]["creationTimestamp"]
    kubeapi.advance_clock(3600)
    after = kubeapi.create(configmap("after"))["metadata"]["creationTimestamp"]
    assert timedelta(seconds=3600) <= stamp(after) - stamp(before) <= timedelta(seconds=3602)
    now = datetime.now(UTC).replace(microsecond=0)
    assert now + timedelta(seconds=3599) <= stamp(after) <= now + timedelta(seconds=3600)


@pytest.mark.double_only("drives the double's /_kubeapi/ control endpoints, which only it has")
def test_control_plane_over_http(kubeapi: KubeAPI, k8s: Clients) -> None:
    import json
    import urllib.request

    def post(path: str, body: dict[str, object]) -> dict[str, object]:
        request = urllib.request.Request(
            f"{kubeapi.url}/_kubeapi/{path}", data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request) as response:
            result: dict[str, object] = json.loads(response.read())
            return result

    k8s.batch.create_namespaced_job(NS, job_manifest("train"))
    kubeapi.clear_log()
    created = post("job-controller", {})
    assert len(created["created"]) == 1  # type: ignore[arg-type]
    assert post("kubelet", {"job": "train", "phase": "Succeeded"})["pods"] == created["created"]
    assert conditions(k8s, "train")["Complete"] == ("True", "CompletionsReached")
    assert all(not e["path"].startswith("/_kubeapi") for e in kubeapi.request_log)
