"""The real kubectl against the API double."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.kubeapi.harness import KubeAPI

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  labels: {{app: mx, tier: {tier}}}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: mxnet
        image: mxnet:1
"""


def kubectl(api: KubeAPI, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(api.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def create_job(api: KubeAPI, tmp_path: Path, name: str, tier: str = "worker") -> None:
    manifest = tmp_path / f"{name}.yaml"
    manifest.write_text(JOB.format(name=name, tier=tier))
    result = kubectl(api, "create", "-f", str(manifest))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"job.batch/{name} created"


def get_json(api: KubeAPI, *args: str) -> Any:
    result = kubectl(api, "get", *args, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_create_validates_strictly_on_the_server(kubeapi: KubeAPI, tmp_path: Path) -> None:
    create_job(kubeapi, tmp_path, "train")
    creates = [e for e in kubeapi.request_log if e["verb"] == "create"]
    assert creates[0]["query"]["fieldValidation"] == "Strict"
    bad = tmp_path / "bad.yaml"
    bad.write_text(JOB.format(name="bad", tier="x").replace("backoffLimit: 0", "foo: 1"))
    result = kubectl(kubeapi, "create", "-f", str(bad))
    assert result.returncode == 1
    assert 'strict decoding error: unknown field "spec.foo"' in result.stderr
    assert "Error from server (BadRequest)" in result.stderr
    again = kubectl(kubeapi, "create", "-f", str(tmp_path / "train.yaml"))
    assert "Error from server (AlreadyExists): error when creating" in again.stderr
    assert 'jobs.batch "train" already exists' in again.stderr


def test_get_with_selectors(kubeapi: KubeAPI, tmp_path: Path) -> None:
    create_job(kubeapi, tmp_path, "a", tier="worker")
    create_job(kubeapi, tmp_path, "b", tier="server")
    create_job(kubeapi, tmp_path, "c", tier="scheduler")

    def names(selector: str) -> list[str]:
        return [i["metadata"]["name"] for i in get_json(kubeapi, "jobs", "-l", selector)["items"]]

    assert names("tier=worker") == ["a"]
    assert names("tier==server") == ["b"]
    assert names("tier!=worker") == ["b", "c"]
    assert names("tier in (worker,server)") == ["a", "b"]
    assert names("tier notin (worker),app") == ["b", "c"]
    assert names("!app") == []
    one = get_json(kubeapi, "job", "a")
    assert one["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "a"
    bad = kubectl(kubeapi, "get", "jobs", "-l", "tier in (a")
    assert bad.returncode == 1
    assert "unable to parse requirement: found '', expected: ',' or ')'" in bad.stderr


def test_replace_with_stale_resource_version_conflicts(kubeapi: KubeAPI, tmp_path: Path) -> None:
    create_job(kubeapi, tmp_path, "train")
    stale = get_json(kubeapi, "job", "train")
    assert kubectl(kubeapi, "label", "job", "train", "x=y").returncode == 0
    path = tmp_path / "stale.json"
    path.write_text(json.dumps(stale))
    result = kubectl(kubeapi, "replace", "-f", str(path))
    assert result.returncode == 1
    assert (
        'Error from server (Conflict): error when replacing "' + str(path) + '": Operation cannot '
        'be fulfilled on jobs.batch "train": the object has been modified; please apply your '
        "changes to the latest version and try again"
    ) in result.stderr


def test_patching_a_job_template_is_refused(kubeapi: KubeAPI, tmp_path: Path) -> None:
    create_job(kubeapi, tmp_path, "train")
    patch = '{"spec":{"template":{"spec":{"containers":[{"name":"mxnet","image":"mxnet:2"}]}}}}'
    result = kubectl(kubeapi, "patch", "job", "train", "-p", patch)
    assert result.returncode == 1
    assert 'The Job "train" is invalid: spec.template: Invalid value: ' in result.stderr
    assert result.stderr.strip().endswith("field is immutable")
    ok = kubectl(
        kubeapi, "patch", "job", "train", "--type=merge", "-p", '{"spec":{"suspend":true}}'
    )
    assert ok.returncode == 0, ok.stderr
    assert kubeapi.get("jobs", "train")["spec"]["suspend"] is True  # type: ignore[index]


def test_apply_then_apply_again(kubeapi: KubeAPI, tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB.format(name="train", tier="worker"))
    first = kubectl(kubeapi, "apply", "-f", str(manifest))
    assert first.returncode == 0, first.stderr
    manifest.write_text(JOB.format(name="train", tier="server"))
    second = kubectl(kubeapi, "apply", "-f", str(manifest))
    assert second.returncode == 0, second.stderr
    assert "job.batch/train configured" in second.stdout
    assert kubeapi.get("jobs", "train")["metadata"]["labels"]["tier"] == "server"  # type: ignore[index]


def test_delete_takes_the_jobs_pods(kubeapi: KubeAPI, tmp_path: Path) -> None:
    create_job(kubeapi, tmp_path, "train")
    kubeapi.run_job_controller()
    assert len(kubeapi.objects("pods")) == 1
    result = kubectl(kubeapi, "delete", "job", "train")
    assert result.returncode == 0, result.stderr
    # kubectl 1.34 adds "from default namespace"; earlier releases say no more
    assert result.stdout.strip().startswith('job.batch "train" deleted')
    assert kubeapi.objects("jobs") == []
    kubeapi.settle()  # the real garbage collector deletes the pods after the Job
    assert kubeapi.objects("pods") == []
    delete = next(e for e in kubeapi.request_log if e["method"] == "DELETE")
    assert delete["status"] == 200


def test_api_resources(kubeapi: KubeAPI) -> None:
    result = kubectl(kubeapi, "api-resources", "--no-headers")
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()}
    served = {"configmaps", "events", "pods", "services", "jobs", "leases"}
    # The double serves what mxgitops and kubectl need; the real server serves them among all.
    assert set(rows) == served if kubeapi.backend == "double" else served <= set(rows)
    assert rows["jobs"][1:] == ["batch/v1", "true", "Job"]
    assert rows["pods"][1:] == ["po", "v1", "true", "Pod"]
