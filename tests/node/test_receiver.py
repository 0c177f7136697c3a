"""From `git push` to a dist job's pods on the real parts, through the real Gitea's
push webhook and the receiver's own pod.

A user's overlay (a copy of ``cronjob/overlays/example`` for another instance, ``push``,
in its own namespace, with ``components/receiver``, its Service made a NodePort, as a
cluster without an Ingress would expose it) is installed on the real node by
``kubectl apply -k``: the CronJob (its schedule half a year away, so that every sync is a
push's; suspended, it would get none), its
RBAC, and the receiver's Deployment, whose pod (made by the test from its template:
this control plane runs no Deployment controller) runs the project's image with
another command, as its ServiceAccount, under Pod Security ``restricted``. The jobs repository
lives on a real Gitea, listening where the node's pods reach the host; the repository's
Gitea webhook (push events, the secret) is delivered to the node's address and the
NodePort. For each of 5 runs the test commits a new dist job (scheduler, server,
worker) and pushes it; from the push returning it measures until all three pods exist,
and until the sync's note is on the commit; the sync's Job is awaited to end before
the next run. The issue's bound: a median under 15 s, the worst under 30 s.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from mxgitops.objects import COMMIT_ANNOTATION
from mxgitops.receiver.manualjob import finished
from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.images import TOOLBOX_IMAGE
from tests.controlplane.projectimage import PROJECT_IMAGE
from tests.forges.webhooks import SECRET, rarely
from tests.gitea.server import ADMIN, Gitea
from tests.gitrepos.fixtures import run_git
from tests.helpers.cronjob import CRONJOB as CRONJOB_DIR
from tests.helpers.cronjobruns import kubectl

NAMESPACE = "mxgitops-push"
CRONJOB = "mxgitops-push"
RECEIVER = "mxgitops-receiver-push"  # its Deployment, Service and ServiceAccount
JOBS_NAMESPACE = "ml-push"
RUNS = 5
RUN_TIMEOUT = 120.0  # seconds from a push to its note, at most


def push_overlay(root: Path, repo_url: str) -> Path:
    """The example overlay copied for the instance `push`, as its comment says (the
    namespace, the nameSuffix and MXGITOPS_INSTANCE together), with the receiver's
    component, the project's image, the Git cache in the base's emptyDir, and the
    CronJob's schedule half a year away."""
    shutil.copytree(CRONJOB_DIR, root / "cronjob")
    overlay = root / "cronjob/overlays/push"
    shutil.copytree(root / "cronjob/overlays/example", overlay)
    for made_by_example in ("cache.yaml", "cache-volume.yaml"):
        (overlay / made_by_example).unlink()
    namespace = overlay / "namespace.yaml"
    namespace.write_text(namespace.read_text().replace("mxgitops-example", NAMESPACE))
    (overlay / "config.env").write_text(
        f"MXGITOPS_REPO={repo_url}\nMXGITOPS_REF=main\nMXGITOPS_INSTANCE=push\n"
    )
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    name, tag = PROJECT_IMAGE.rsplit(":", 1)
    kustomization.update(
        nameSuffix="-push",
        resources=["namespace.yaml", "../../base"],
        components=["../../components/receiver"],
        transformers=[kustomization["transformers"][0].replace("mxgitops-example", NAMESPACE)],
        images=[
            {"name": image, "newName": name, "newTag": tag}
            for image in ("mxgitops", "ghcr.io/example/mxgitops")
        ],
        patches=[
            {
                "target": {"kind": "CronJob"},
                "patch": f"- op: replace\n  path: /spec/schedule\n  value: '{rarely()}'\n",
            },
            {
                "target": {"kind": "Service", "name": "mxgitops-receiver"},
                "patch": "- op: add\n  path: /spec/type\n  value: NodePort\n",
            },
        ],
    )
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return overlay


def dist_job(name: str) -> str:
    container = {
        "name": "mxnet",
        "image": TOOLBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"],
    }
    replica = {"replicas": 1, "template": {"spec": {"containers": [container]}}}
    return yaml.safe_dump(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MXJob",
            "metadata": {"name": name},
            "spec": {
                "mxReplicaSpecs": {"Scheduler": replica, "Server": replica, "Worker": replica}
            },
        }
    )


@dataclass
class Setup:
    cluster: RealCluster
    gitea: Gitea
    work: Path  # a clone that pushes to the Gitea

    def commit(self, files: dict[str, str], message: str) -> str:
        for name, text in files.items():
            (self.work / name).parent.mkdir(parents=True, exist_ok=True)
            (self.work / name).write_text(text)
        run_git("add", "-A", cwd=self.work)
        run_git("commit", "-q", "-m", message, cwd=self.work)
        return run_git("rev-parse", "HEAD", cwd=self.work)

    def push(self) -> None:
        run_git("push", "-q", "origin", "HEAD:main", cwd=self.work)

    def pods_of(self, commit: str) -> int:
        """How many pods the Jobs the sync of `commit` created have."""
        jobs = [
            j
            for j in self.cluster.objects("jobs", JOBS_NAMESPACE)
            if (j["metadata"].get("annotations") or {}).get(COMMIT_ANNOTATION) == commit
        ]
        uids = {j["metadata"]["uid"] for j in jobs}
        pods = self.cluster.objects("pods", JOBS_NAMESPACE)
        return sum(
            any(o.get("uid") in uids for o in p["metadata"].get("ownerReferences") or [])
            for p in pods
        )

    def noted(self, commit: str) -> bool:
        fetched = subprocess.run(
            ["git", "fetch", "-q", "origin", "+refs/notes/mxgitops:refs/notes/mxgitops"],
            cwd=self.work,
            capture_output=True,
        )
        if fetched.returncode != 0:
            return False
        shown = subprocess.run(
            ["git", "notes", "--ref=mxgitops", "show", commit], cwd=self.work, capture_output=True
        )
        return shown.returncode == 0

    def syncs_running(self) -> bool:
        return any(not finished(j) for j in self.cluster.objects("jobs", NAMESPACE))


def receiver_pod(cluster: RealCluster) -> None:
    """The Deployment's pod, made as its ReplicaSet would make it: this control plane
    runs no Deployment or ReplicaSet controller (tests/controlplane/launcher.py)."""
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{RECEIVER}"
    template = cluster.rest.get(path)["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{RECEIVER}-0", "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    }
    status, _, body = cluster.raw("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod)
    assert status == 201, body


def node_address(cluster: RealCluster) -> str:
    (node,) = cluster.rest.get("/api/v1/nodes")["items"]
    return next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")


@pytest.fixture
def node_gitea(real_node: RealCluster, tmp_path: Path) -> Iterator[Gitea]:
    """A Gitea where the node's pods reach the host (its name builds it at collection)."""
    with Gitea(tmp_path / "gitea", host=real_node.plane.bind_address) as gitea:
        yield gitea


@pytest.fixture
def setup(real_node: RealCluster, node_gitea: Gitea, tmp_path: Path) -> Iterator[Setup]:
    cluster, gitea = real_node, node_gitea
    repo_url = gitea.create_repository("jobs")
    token = gitea.token("sync", ["write:repository"])
    work = tmp_path / "work"
    work.mkdir()
    run_git("init", "-q", "-b", "main", cwd=work)
    run_git("remote", "add", "origin", repo_url.replace("://", f"://{ADMIN}:{token}@"), cwd=work)
    overlay = push_overlay(tmp_path, repo_url)
    kubeconfig = cluster.plane.kubeconfig(tmp_path / "admin.kubeconfig", user=cluster.plane.admin)
    with cluster.keeping(frozenset({NAMESPACE, JOBS_NAMESPACE})):
        try:
            cluster.ensure_namespace(JOBS_NAMESPACE)
            kubectl(kubeconfig, "apply", "-f", str(overlay / "namespace.yaml"))
            for name, literal in (
                ("mxgitops-git", f"token={token}"),
                ("mxgitops-webhook", f"secret={SECRET.decode()}"),
            ):
                secret = ("create", "secret", "generic", name, f"--from-literal={literal}")
                kubectl(kubeconfig, "-n", NAMESPACE, *secret)
            kubectl(kubeconfig, "apply", "-k", str(overlay))
            receiver_pod(cluster)
            service = cluster.rest.get(f"/api/v1/namespaces/{NAMESPACE}/services/{RECEIVER}")
            (port,) = [p["nodePort"] for p in service["spec"]["ports"]]
            gitea.api(
                "POST",
                f"/repos/{ADMIN}/jobs/hooks",
                json={
                    "type": "gitea",
                    "config": {
                        "url": f"http://{node_address(cluster)}:{port}/webhook",
                        "content_type": "json",
                        "secret": SECRET.decode(),
                    },
                    "events": ["push"],
                    "branch_filter": "main",
                    "active": True,
                },
            )
            try:
                yield Setup(cluster, gitea, work)
            finally:  # what the receiver said, for a failure's report
                logs = subprocess.run(
                    ["kubectl", f"--kubeconfig={kubeconfig}", "-n", NAMESPACE, "logs",
                     f"{RECEIVER}-0", "--tail=40"],
                    capture_output=True, text=True, timeout=60,
                )  # fmt: skip
                print(logs.stdout, logs.stderr)
                for pod in cluster.objects("pods", NAMESPACE):
                    print(pod["metadata"]["name"], json.dumps(pod.get("status"))[:3000])
        finally:
            subprocess.run(
                [
                    "kubectl",
                    f"--kubeconfig={kubeconfig}",
                    "delete",
                    "-k",
                    str(overlay),
                    "--wait=false",
                    "--ignore-not-found",
                ],
                capture_output=True,
                timeout=60,
            )
            cluster.raw("DELETE", f"/api/v1/namespaces/{JOBS_NAMESPACE}")


@pytest.mark.timeout(900)
def test_a_push_through_giteas_webhook_runs_the_job_within_seconds(setup: Setup) -> None:
    cluster = setup.cluster
    # The receiver's own pod, in the cluster: Ready once it has listed the CronJob's Jobs.
    wait_for(
        "the receiver's pod Ready",
        lambda: any(
            any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
            for p in cluster.objects("pods", NAMESPACE)
            if p["metadata"]["name"].startswith(RECEIVER)
        ),
        timeout=180,
    )
    setup.commit({".mxgitops.yaml": f"namespace: {JOBS_NAMESPACE}\npath: jobs\n"}, "settings")
    to_pods: list[float] = []
    to_note: list[float] = []
    syncs: dict[str, str] = {}  # the push's Jobs seen (the CronJob keeps the last 3)
    for run in range(RUNS):
        commit = setup.commit({f"jobs/run-{run}.yaml": dist_job(f"run-{run}")}, f"run {run}")
        setup.push()
        pushed = time.monotonic()
        wait_for(f"run {run}'s pods", lambda c=commit: setup.pods_of(c) == 3, RUN_TIMEOUT)
        to_pods.append(time.monotonic() - pushed)
        wait_for(f"run {run}'s note", lambda c=commit: setup.noted(c), RUN_TIMEOUT)
        to_note.append(time.monotonic() - pushed)
        wait_for(f"run {run}'s sync to end", lambda: not setup.syncs_running(), RUN_TIMEOUT)
        syncs |= {
            j["metadata"]["name"]: j["metadata"]["annotations"]["mxgitops.io/push"]
            for j in cluster.objects("jobs", NAMESPACE)
            if j["metadata"]["name"].startswith(f"{CRONJOB}-push-")
        }
    print(
        f"push -> all 3 pods: {', '.join(f'{s:.1f}' for s in to_pods)} s "
        f"(median {statistics.median(to_pods):.1f}, worst {max(to_pods):.1f}); "
        f"push -> note: {', '.join(f'{s:.1f}' for s in to_note)} s "
        f"(median {statistics.median(to_note):.1f}, worst {max(to_note):.1f}); "
        f"{len(syncs)} syncs started"
    )
    assert len(syncs) == RUNS  # one per push: each came after the one before had ended
    assert all(push.startswith("gitea delivery") for push in syncs.values()), syncs
    assert statistics.median(to_pods) < 15, to_pods
    assert max(to_pods) < 30, to_pods
