"""`mxgitops uninstall --jobs` deletes the JobSet runtime's jobs too: on the real control
plane with the real JobSet controller (tests/ecosystem/), this instance's JobSets go
(their Jobs with them) and another instance's stay."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from mxgitops.cli import ExitCode, main
from mxgitops.objects import INSTANCE_LABEL, MANAGED_BY_LABEL
from tests.controlplane.harness import wait_for
from tests.ecosystem.fixtures import Ecosystem

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2"
NAMESPACE = "ml"


def jobset(name: str, instance: str) -> dict[str, Any]:
    labels = {MANAGED_BY_LABEL: "mxgitops", INSTANCE_LABEL: instance}
    container = {"name": "mxnet", "image": "mxnet/python:1.9.1"}
    pod = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "suspend": True,  # nothing runs: only which JobSets remain is looked at
            "replicatedJobs": [
                {"name": "worker", "replicas": 1, "template": {"spec": {"template": pod}}}
            ],
        },
    }


def test_uninstall_jobs_deletes_this_instances_jobsets(ecosystem: Ecosystem) -> None:
    ecosystem.real.ensure_namespace(NAMESPACE)
    ecosystem.create(JOBSETS, "jobsets", jobset("ours", "default"), NAMESPACE)
    ecosystem.create(JOBSETS, "jobsets", jobset("theirs", "prod"), NAMESPACE)
    args = ["uninstall", "--jobs", "--yes", "--kubeconfig", str(ecosystem.kubeconfig)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == ExitCode.OK, result.output
    assert f"JobSet {NAMESPACE}/ours deleted" in result.output
    left = lambda: {j["metadata"]["name"] for j in ecosystem.jobsets(NAMESPACE)}  # noqa: E731
    wait_for("this instance's JobSet to go", lambda: left() == {"theirs"} or None, timeout=60)
