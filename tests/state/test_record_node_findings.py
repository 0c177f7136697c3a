"""What the training record's run on the real node (tests/node/test_record.py) found,
held on the API double.

- A job seen finished keeps its batch Jobs when their pods succeeded but the job
  controller has not yet written their Complete condition: the sync read a local job
  Succeeded and stopped its "still active" batch Job, deleting the pod whose log and
  times the record had just read. A batch Job of one completion whose pod succeeded
  is done; only the controller's bookkeeping is late. The double's job controller
  acts when stepped, so that moment is written here by hand.
- A run's CPU-core-hours come from its pods' requests: the sync's LIST of pods kept
  no container (planning reads none), so every run used 0 cores.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mxgitops.commands.sync import sync
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.sync import NS, batch_job, files, git_config, job_objects, mxjob, summary_of
from tests.kubeapi.clients import raw
from tests.kubeapi.harness import KubeAPI


def uncounted(api: KubeAPI, name: str) -> None:
    """The batch Job ``name`` as the job controller has it before it counted its pod's
    success: still active, no condition (the double's kubelet step counts at once)."""
    job = api.get("jobs", name, NS)
    assert job is not None
    job["status"] = {"startTime": job["status"]["startTime"], "active": 1}
    path = f"/apis/batch/v1/namespaces/{NS}/jobs/{name}/status"
    status, _, body = raw(api, "PUT", path, job)
    assert status == 200, body


@pytest.mark.double_only("writes what the real node's kubelet wrote, and moves the double's clock")
@pytest.mark.parametrize("phase", ["Succeeded", "Running"])
def test_a_succeeded_pods_batch_job_is_not_stopped_before_its_controller_completes_it(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path, phase: str
) -> None:
    """``Running``: its container exited 0, and the kubelet has not yet written the
    pod's phase (it does once the pod's sandbox is torn down)."""
    remote = make_git_remote(
        "jobs", files=files(mxjob("loop", servers=0, restart="Never", args=["train.py"]))
    )
    config = git_config(remote, kubeapi, tmp_path)
    sync(config)
    kubeapi.run_job_controller(NS)
    worker = batch_job(kubeapi, "loop", "worker")
    kubeapi.kubelet(job=worker, namespace=NS, phase="Running")
    kubeapi.kubelet(job=worker, namespace=NS, phase="Succeeded")
    uncounted(kubeapi, worker)
    if phase == "Running":
        (pod,) = [
            p for p in kubeapi.objects("pods", NS) if p["metadata"]["name"].startswith(worker)
        ]
        pod["status"]["phase"] = "Running"
        path = f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}/status"
        status, _, body = raw(kubeapi, "PUT", path, pod)
        assert status == 200, body

    done = summary_of(sync(config), "loop")
    assert done.state == "Succeeded", done
    assert done.action != "stop", done.reason
    names = {o["metadata"]["name"] for o in job_objects(kubeapi, "loop")}
    assert worker in names
    pods = [p for p in kubeapi.objects("pods", NS) if p["metadata"]["name"].startswith(worker)]
    assert [p["status"]["phase"] for p in pods] == [phase]


@pytest.mark.double_only("writes what the real node's kubelet wrote, and moves the double's clock")
def test_a_runs_cpu_core_hours_are_its_pods_requests_times_their_running_time(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    job = mxjob("loop", servers=0, restart="Never", args=["train.py"])
    (container,) = job["spec"]["mxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    container["resources"] = {"requests": {"cpu": "1500m", "memory": "64Mi"}}
    config = git_config(make_git_remote("jobs", files=files(job)), kubeapi, tmp_path)
    sync(config)
    kubeapi.run_job_controller(NS)
    worker = batch_job(kubeapi, "loop", "worker")
    kubeapi.kubelet(job=worker, namespace=NS, phase="Running")
    kubeapi.advance_clock(1800)
    kubeapi.kubelet(job=worker, namespace=NS, phase="Succeeded")

    record = summary_of(sync(config), "loop").record
    assert record is not None and record.resources is not None
    assert record.resources.pods == 1 and not record.resources.estimate, record.resources
    assert record.duration_seconds == 1800
    assert record.resources.cpu_core_hours == 0.75  # 1.5 cores for half an hour
