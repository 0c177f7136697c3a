"""The CronJob as a user installs it, run by the real CronJob controller on the real node.

A user's overlay over ``cronjob/overlays/example`` sets two things, the image (the
project's own, built from its Dockerfile: ``tests/controlplane/projectimage.py``)
and the repository URL (a Git server on the host's end of the node's network, which
pods reach); ``kubectl apply -k`` installs everything else exactly as rendered:
namespace (Pod Security ``restricted`` enforced), ServiceAccount, RBAC, ConfigMap,
PersistentVolumeClaim, CronJob. As a cluster admin would, the test provides what the
cluster must: a PersistentVolume for the Git cache's claim and the Secret with the
Git token (``mxgitops-git``).

The controller starts the first run on the schedule (``*/5``: within five minutes);
its pod, non-root with a read-only root filesystem, reads its in-cluster config from
the projected token, fetches the repository, creates the job and pushes the note.
The second run is started from the CronJob's template at once (``kubectl create job
--from=cronjob/...``, as a person does to run it now), and is a no-op: 4 requests in
the audit log. ``kubectl logs`` of each run shows its summary.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.images import TOOLBOX_IMAGE
from tests.controlplane.projectimage import PROJECT_IMAGE
from tests.gitfixtures import GitHttpServer, GitRemote

OVERLAY = Path(__file__).resolve().parents[1] / "cronjob" / "overlays" / "example"
NAMESPACE = "mxgitops-example"  # the example overlay's
CRONJOB = "mxgitops-example"
JOBS_NAMESPACE = "ml-training"
TOKEN = "s3cret-token"
SCHEDULE_TIMEOUT = 330.0  # the schedule is */5: the first run starts within 5 minutes


def kubectl(cluster: RealCluster, *args: str) -> str:
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def user_overlay(directory: Path, repo_url: str) -> Path:
    """The user's kustomization: the example overlay, with only the image and the
    repository URL set."""
    directory.mkdir(parents=True)
    name, tag = PROJECT_IMAGE.rsplit(":", 1)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(OVERLAY, directory)],
        "images": [{"name": "ghcr.io/example/mxgitops", "newName": name, "newTag": tag}],
        "configMapGenerator": [
            {
                "name": "mxgitops-config",
                "behavior": "merge",
                "literals": [f"MXGITOPS_REPO={repo_url}"],
            }
        ],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return directory


def sleeper_job() -> str:
    container = {
        "name": "mxnet",
        "image": TOOLBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", "echo training; sleep 3600"],
    }
    return yaml.safe_dump(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MXJob",
            "metadata": {"name": "sleeper"},
            "spec": {
                "mxReplicaSpecs": {
                    "Worker": {"replicas": 1, "template": {"spec": {"containers": [container]}}}
                }
            },
        }
    )


def cache_volume(cluster: RealCluster, directory: Path) -> None:
    """What a cluster's storage provides: a volume the Git cache's claim binds to,
    writable by the sync's user (10001)."""
    directory.mkdir(parents=True)
    os.chown(directory, 10001, 10001)
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "mxgitops-cache-node-test"},
        "spec": {
            "capacity": {"storage": "2Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "hostPath": {"path": str(directory), "type": "Directory"},
            "claimRef": {"namespace": NAMESPACE, "name": "mxgitops-cache-example"},
        },
    }
    status, _, body = cluster.raw("POST", "/api/v1/persistentvolumes", volume)
    assert status == 201, body


def git_secret(cluster: RealCluster) -> None:
    cluster.ensure_namespace(NAMESPACE)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "mxgitops-git"},
        "stringData": {"token": TOKEN},
    }
    status, _, body = cluster.raw("POST", f"/api/v1/namespaces/{NAMESPACE}/secrets", secret)
    assert status == 201, body


def finished_run(cluster: RealCluster, job: str | None = None) -> dict[str, Any] | None:
    """A batch Job of the CronJob (or the one named) that has finished, or None."""
    for obj in cluster.objects("jobs", NAMESPACE):
        if job is not None and obj["metadata"]["name"] != job:
            continue
        conditions = {c["type"]: c["status"] for c in obj["status"].get("conditions") or []}
        if conditions.get("Complete") == "True":
            return obj
        if conditions.get("Failed") == "True":
            raise AssertionError(f"the run {obj['metadata']['name']} failed: {obj['status']}")
    return None


@pytest.mark.timeout(SCHEDULE_TIMEOUT + 240)
def test_the_cronjob_as_installed_syncs_from_a_pod_on_schedule(
    node_cluster: RealCluster,
    make_git_remote: Callable[..., GitRemote],
    make_git_http_server: Callable[..., GitHttpServer],
    tmp_path: Path,
) -> None:
    remote = make_git_remote(
        "jobs",
        files={
            ".mxgitops.yaml": f"namespace: {JOBS_NAMESPACE}\npath: jobs\n",
            "jobs/sleeper.yaml": sleeper_job(),
        },
    )
    server = make_git_http_server(
        remote.bare.parent, logins={("x-access-token", TOKEN)}, host=node_cluster.plane.bind_address
    )
    url = server.url(remote.bare.name.removesuffix(".git"))
    overlay = user_overlay(tmp_path / "overlay", url)
    made_volume = False
    try:
        git_secret(node_cluster)
        cache_volume(node_cluster, tmp_path / "cache-volume")
        made_volume = True
        kubectl(node_cluster, "apply", "-k", str(overlay))
        rendered = list(yaml.safe_load_all(kubectl(node_cluster, "kustomize", str(overlay))))
        check_runs(node_cluster, remote, rendered)
    finally:
        subprocess.run(
            [
                "kubectl",
                f"--kubeconfig={node_cluster.kubeconfig}",
                "delete",
                "-k",
                str(overlay),
                "--wait=false",
                "--ignore-not-found",
            ],
            capture_output=True,
            timeout=60,
        )
        if made_volume:
            node_cluster.raw("DELETE", "/api/v1/persistentvolumes/mxgitops-cache-node-test")


def check_runs(cluster: RealCluster, remote: GitRemote, rendered: list[dict[str, Any]]) -> None:
    (cronjob,) = [d for d in rendered if d["kind"] == "CronJob"]
    status, _, live = cluster.raw(
        "GET", f"/apis/batch/v1/namespaces/{NAMESPACE}/cronjobs/{CRONJOB}"
    )
    assert status == 200, live
    _same_containers(live, cronjob)  # installed as rendered: image, command, securityContext

    first = wait_for(
        "the CronJob's first scheduled run", lambda: finished_run(cluster), timeout=SCHEDULE_TIMEOUT
    )
    owners = [o["kind"] for o in first["metadata"].get("ownerReferences", [])]
    assert owners == ["CronJob"], first["metadata"]  # started by the CronJob controller
    log = kubectl(cluster, "logs", "-n", NAMESPACE, f"job/{first['metadata']['name']}")
    print(log)
    assert "sleeper" in log, log
    jobs = [j["metadata"]["name"] for j in cluster.objects("jobs", JOBS_NAMESPACE)]
    assert any(name.startswith("sleeper-worker-") for name in jobs), jobs
    note = remote.note(remote.rev())
    assert note is not None and "sleeper" in note, note

    pod = next(
        p
        for p in cluster.objects("pods", NAMESPACE)
        if p["metadata"]["labels"].get("job-name") == first["metadata"]["name"]
    )
    assert "kube-api-access" in json.dumps(pod["spec"]["volumes"])  # the projected token
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["spec"]["securityContext"]["runAsUser"] == 10001
    namespace = cluster.rest.get(f"/api/v1/namespaces/{NAMESPACE}")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"

    cluster.clear_log()
    kubectl(cluster, "create", "job", "-n", NAMESPACE, f"--from=cronjob/{CRONJOB}", "run-now")
    wait_for("the second run", lambda: finished_run(cluster, "run-now"), timeout=120)
    log = kubectl(cluster, "logs", "-n", NAMESPACE, "job/run-now")
    print(log)
    assert "1 unchanged" in log, log
    requests = [e for e in cluster.request_log if e["user"].startswith("system:serviceaccount:")]
    assert {e["user"] for e in requests} == {f"system:serviceaccount:{NAMESPACE}:{CRONJOB}"}
    # A no-op sync: its 4 LISTs (ledger, jobs, services, pods) and nothing written. The
    # JobSet runtime's LIST is one more where JobSet is not installed (404, as here).
    served = [e for e in requests if e["status"] != 404]
    assert sorted((e["verb"], e["path"]) for e in served) == [
        ("list", "/api/v1/namespaces/mxgitops-example/configmaps"),
        ("list", "/api/v1/pods"),
        ("list", "/api/v1/services"),
        ("list", "/apis/batch/v1/jobs"),
    ], json.dumps(requests, indent=1)
    unserved = {(e["verb"], e["path"]) for e in requests if e["status"] == 404}
    assert unserved <= {("list", "/apis/jobset.x-k8s.io/v1alpha2/jobsets")}, unserved
    print(
        f"the no-op run made {len(requests)} requests: {len(served)} answered, {len(unserved)} 404"
    )


def _same_containers(live: dict[str, Any], rendered: dict[str, Any]) -> None:
    """The live CronJob's containers hold every field as rendered (the server adds
    defaults such as terminationMessagePath)."""

    def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
        return list(obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"])

    for mine, theirs in zip(containers(rendered), containers(live), strict=True):
        for key, value in mine.items():
            assert theirs.get(key) == value or key == "resources", (key, value, theirs.get(key))
