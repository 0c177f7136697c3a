"""`mxgitops uninstall` leaves the training jobs alone unless `--jobs` is given and
confirmed; with it, it deletes this instance's jobs' objects (the batch Jobs and their
Services carrying its managed-by and instance labels) and nobody else's."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from mxgitops.cli import ExitCode, main
from mxgitops.objects import INSTANCE_LABEL, MANAGED_BY_LABEL


def job(name: str, instance: str) -> dict[str, Any]:
    labels = {MANAGED_BY_LABEL: "mxgitops", INSTANCE_LABEL: instance}
    container = {"name": "mxnet", "image": "mxnet/python:1.9.1"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "suspend": True,  # nothing runs: only which Jobs remain is looked at
            "template": {
                "metadata": {"labels": labels},
                "spec": {"restartPolicy": "Never", "containers": [container]},
            },
        },
    }


def names(kubeapi: Any) -> set[str]:
    return {j["metadata"]["name"] for j in kubeapi.objects("jobs", "ml")}


def uninstall(kubeapi: Any, *args: str, answer: str = "") -> Any:
    flags = ["uninstall", "--kubeconfig", str(kubeapi.kubeconfig), *args]
    return CliRunner().invoke(main, flags, input=answer)


def test_training_jobs_stay_without_jobs_or_its_confirmation(kubeapi: Any) -> None:
    kubeapi.create(job("ours", "default"), namespace="ml")
    assert uninstall(kubeapi).exit_code == ExitCode.OK
    refused = uninstall(kubeapi, "--jobs", answer="n\n")
    assert refused.exit_code != ExitCode.OK
    assert "Delete every training job this instance runs" in refused.output
    assert names(kubeapi) == {"ours"}


def test_with_jobs_confirmed_only_this_instances_jobs_go(kubeapi: Any) -> None:
    kubeapi.create(job("ours", "default"), namespace="ml")
    kubeapi.create(job("theirs", "prod"), namespace="ml")
    result = uninstall(kubeapi, "--jobs", answer="y\n")
    assert result.exit_code == ExitCode.OK, result.output
    assert "Job ml/ours deleted" in result.output
    kubeapi.settle("ml")
    assert names(kubeapi) == {"theirs"}
