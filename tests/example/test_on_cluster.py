"""jobs-repo-example/, pushed to a real Git remote and synced onto each backend by the
CLI, runs as a real cluster runs it: its local job to Succeeded, and its dist job whose
worker exits 1 under restartPolicy ExitCode to Failed through the job controller's
podFailurePolicy. On the real control plane that is the real job controller deciding;
`mxgitops status` then shows both from the note.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mxgitops.cli import main
from tests.gitrepos.fixtures import GitRemote
from tests.kubeapi.harness import KubeAPI

EXAMPLE = Path(__file__).resolve().parents[2] / "jobs-repo-example"
NS = "ml-training"  # jobs-repo-example/.mxgitops.yaml


def example_files() -> dict[str, str]:
    return {
        p.relative_to(EXAMPLE).as_posix(): p.read_text()
        for p in sorted(EXAMPLE.rglob("*"))
        if p.is_file()
    }


def batch_job(kubeapi: KubeAPI, job: str, role: str, index: int = 0) -> dict[str, Any]:
    pattern = re.compile(rf"{job}-{role}-[0-9a-z]{{5}}-{index}")
    (found,) = [o for o in kubeapi.objects("jobs", NS) if pattern.fullmatch(o["metadata"]["name"])]
    return found


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj["status"].get("conditions") or [] if c["type"] == kind), None)


def test_the_example_repository_runs_to_its_end_states(
    kubeapi: KubeAPI,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    remote = make_git_remote("jobs", files=example_files())
    common = [
        "--repo",
        remote.url,
        "--kubeconfig",
        str(kubeapi.kubeconfig),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--instance",
        "example",
        "--state-namespace",
        "mxgitops",
    ]

    def sync() -> None:
        kubeapi.settle()  # syncs are minutes apart: the controllers have caught up
        result = CliRunner().invoke(main, ["sync", *common], catch_exceptions=False)
        assert result.exit_code == 0, result.output

    sync()
    kubeapi.run_job_controller(NS)
    local = batch_job(kubeapi, "cifar10-local", "worker")
    kubeapi.kubelet(job=local["metadata"]["name"], namespace=NS, phase="Succeeded")
    worker = batch_job(kubeapi, "bert-gpu", "worker", 1)
    kubeapi.container_log(
        job=worker["metadata"]["name"], namespace=NS, text="epoch 2\nepoch 3\nloss is NaN\n"
    )
    kubeapi.kubelet(
        job=worker["metadata"]["name"],
        namespace=NS,
        phase="Failed",
        exit_code=1,
        message="loss is NaN",
    )

    # The job controller, not mxgitops, decided these.
    failed = kubeapi.get("Job", worker["metadata"]["name"], NS)
    assert failed is not None
    verdict = condition(failed, "Failed")
    assert verdict is not None and verdict["reason"] == "PodFailurePolicy", failed["status"]
    assert "exit code 1" in verdict["message"]
    done = kubeapi.get("Job", local["metadata"]["name"], NS)
    assert done is not None and condition(done, "Complete") is not None

    sync()  # records both end states in the note of the synced commit
    status = CliRunner().invoke(
        main,
        ["status", "--repo", remote.url, "--cache-dir", str(tmp_path / "cache"), "-o", "json"],
        catch_exceptions=False,
    )
    assert status.exit_code == 0, status.output
    jobs = {job["name"]: job for job in json.loads(status.output)["jobs"]}
    assert jobs["cifar10-local"]["state"] == "Succeeded"
    assert jobs["bert-gpu"]["state"] == "Failed"
    failure = jobs["bert-gpu"]["failure"]  # why, kept even once cleanPodPolicy removes pods
    assert (failure["replica"], failure["exit_code"]) == ("WORKER 1", 1)
    assert "PodFailurePolicy" in failure["reason"] and failure["message"] == "loss is NaN"
    assert failure["log"].endswith("loss is NaN\n")
    assert jobs["imagenet-dist"]["state"] not in ("Succeeded", "Failed")
    text = CliRunner().invoke(
        main,
        ["status", "--repo", remote.url, "--cache-dir", str(tmp_path / "cache")],
        catch_exceptions=False,
    )
    assert re.search(r"bert-gpu.*Failed", text.output), text.output
    assert "bert-gpu: failed: WORKER 1 exited 1" in text.output, text.output
