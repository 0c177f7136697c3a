"""A job that fails on the real node (kubelet, containerd, runc; the real job
controller) is told once, with its exit code and its log's last lines, the mention in
its log inert; the syncs after tell nothing more."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.rootfs import TRAINING_IMAGE
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.chatserver import chat_server, notifications_file
from tests.helpers.node_training import NS, cli, sync_args

NAME = "told-once"
SCRIPT = "echo 'epoch 0: loss=nan'; echo 'giving up @channel <!here>'; exit 3"


def failing_job() -> str:
    container = {
        "name": "mxnet",
        "image": TRAINING_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", SCRIPT],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
    }
    worker = {
        "replicas": 1,
        "restartPolicy": "Never",
        "template": {"spec": {"containers": [container]}},
    }
    return yaml.safe_dump(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MXJob",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {"mxReplicaSpecs": {"Worker": worker}},
        }
    )


@pytest.fixture(autouse=True)
def _no_in_cluster_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def test_a_job_failing_on_the_real_node_is_told_once_with_its_exit_code_and_log(
    node_cluster: RealCluster, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files={f"jobs/{NAME}.yaml": failing_job()})
    with chat_server() as chat:
        settings = notifications_file(tmp_path, chat.url, "slack")
        args = [
            *sync_args(remote, node_cluster, tmp_path / "cache"),
            "--notifications-file",
            str(settings),
        ]
        cli("sync", *args)

        def batch_job_failed() -> bool:
            for job in node_cluster.objects("jobs", NS):
                labels: dict[str, Any] = job["metadata"].get("labels") or {}
                if labels.get("job-name", job["metadata"]["name"]).startswith(f"{NAME}-"):
                    conditions = job.get("status", {}).get("conditions") or []
                    return any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)
            return False

        wait_for("the job controller to fail the worker's batch Job", batch_job_failed, 180)
        cli("sync", *args)
        (told,) = chat.requests
        blocks = told.json["blocks"]
        assert blocks[0]["text"]["text"] == f"{NS}/{NAME} failed"
        assert "*Exit code:* 3" in blocks[1]["text"]["text"]
        log = blocks[2]["text"]["text"]
        assert "epoch 0: loss=nan" in log
        assert "giving up @\u2060channel &lt;!here&gt;" in log

        cli("sync", *args)
        cli("sync", *args)
        assert len(chat.requests) == 1
