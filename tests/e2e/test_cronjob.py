"""The CronJob's exact command and environment, taken from the rendered example overlay,
run against the API double and a real jobs repository (a bare remote, notes pushed).

Only what a cluster provides differently here is substituted, each named below: the
repository URL (a local bare remote for the example's), the volumes (directories under
tmp_path at the same variables), the service account's credential (the double's
kubeconfig) and its namespace file (a file holding the CronJob's namespace, as the
kubelet mounts it). The jobs land in the repository's namespace, the Lease and ledger in
the CronJob's, and every request the syncs make is one the rendered RBAC grants.

On the real control plane the rendered objects are installed first (all but the
CronJob, which would start runs of its own, and the PersistentVolumeClaim, which no
storage binds here) and the syncs run with the ServiceAccount's own token: the real
API server's RBAC judges every request, and its PodSecurity admission the CronJob's pod.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepos.fixtures import GitRemote
from tests.helpers.cronjob import (
    CronJobRun,
    Docs,
    example_files,
    granted,
    install,
    only,
    pod_template,
    rendered,
)
from tests.helpers.sync import read_shard
from tests.kubeapi.harness import KubeAPI

__all__ = ["rendered"]  # fixtures from tests/helpers, used here

JOBS_NAMESPACE = "ml-training"  # jobs-repo-example/.mxgitops.yaml
# /api/v1/... or /apis/GROUP/VERSION/..., then namespaces/NS/ or not.
API_PATH = re.compile(r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)/(?:namespaces/(?P<ns>[^/]+)/)?")


def admitted(real: Any, docs: Docs, change: dict[str, Any] | None = None) -> tuple[int, str]:
    """A server-side dry run of the CronJob's pod: what PodSecurity admission says."""
    template = pod_template(docs)
    spec = {**template["spec"], **(change or {})}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "check"}, "spec": spec}
    namespace = only(docs, "CronJob")["metadata"]["namespace"]
    status, _, body = real.raw("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)
    return status, str(body.get("message", ""))


def batch_jobs(kubeapi: KubeAPI, namespace: str) -> set[str]:
    return {o["metadata"]["name"] for o in kubeapi.objects("jobs", namespace)}


def test_the_cronjob_syncs_the_example_repository(
    rendered: Docs,
    make_git_remote: Callable[..., GitRemote],
    kubeapi: KubeAPI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    remote = make_git_remote("jobs", files=example_files())
    real = getattr(kubeapi, "backend", "double") == "real"
    kubeconfig, made = Path(kubeapi.kubeconfig), []
    if real:
        kubeconfig = tmp_path / "serviceaccount.kubeconfig"
        made = install(kubeapi, rendered, kubeconfig)
    try:
        check_the_cronjob(rendered, remote, kubeapi, kubeconfig, tmp_path, monkeypatch)
        if real:
            assert admitted(kubeapi, rendered) == (201, "")
            status, message = admitted(kubeapi, rendered, {"hostNetwork": True})
            assert status == 403 and "violates PodSecurity" in message
    finally:
        for path in made:
            kubeapi.raw("DELETE", path)


def check_the_cronjob(
    rendered: Docs,
    remote: GitRemote,
    kubeapi: Any,
    kubeconfig: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = CronJobRun(rendered, remote, kubeconfig, tmp_path)
    state = run.namespace
    assert state != JOBS_NAMESPACE

    first = run(monkeypatch)
    assert first.exit_code == 0, first.output
    names = batch_jobs(kubeapi, JOBS_NAMESPACE)
    assert {re.sub(r"-[a-z]+-[0-9a-z]{5}-\d+$", "", n) for n in names} == {
        "bert-gpu",
        "cifar10-local",
        "imagenet-dist",
    }
    assert batch_jobs(kubeapi, state) == set()
    instance = run.env["MXGITOPS_INSTANCE"]
    assert kubeapi.get("Lease", f"mxgitops-{instance}", state) is not None
    assert kubeapi.objects("leases", JOBS_NAMESPACE) == []
    note = remote.note(remote.rev())
    assert note is not None and "cifar10-local" in note

    # A job finishes: the next sync records it in the ledger, in the CronJob's namespace.
    kubeapi.run_job_controller(JOBS_NAMESPACE)
    (worker,) = [n for n in names if n.startswith("cifar10-local-worker-")]
    kubeapi.kubelet(job=worker, namespace=JOBS_NAMESPACE, phase="Succeeded")
    second = run(monkeypatch)
    assert second.exit_code == 0, second.output
    book = read_shard(kubeapi.get("ConfigMap", f"mxgitops-ledger-{instance}", state))
    assert {key[1] for key in book.entries} == {"cifar10-local"}
    assert kubeapi.get("ConfigMap", f"mxgitops-ledger-{instance}", JOBS_NAMESPACE) is None

    # A manifest removed by a merged pull request: the job is pruned.
    remote.commit({"jobs/nlp/bert-gpu.yaml": None}, "cancel bert-gpu")
    third = run(monkeypatch)
    assert third.exit_code == 0, third.output
    assert not any(n.startswith("bert-gpu-") for n in batch_jobs(kubeapi, JOBS_NAMESPACE))

    # Every request of the three syncs is granted by the rendered RBAC. (On the real
    # control plane, its API server enforced that: the syncs ran as the ServiceAccount.)
    cluster_wide, own = granted(rendered, "ClusterRole"), granted(rendered, "Role")
    for entry in kubeapi.request_log:
        match = API_PATH.match(entry["path"])
        assert match and entry["verb"], entry
        log = "/log" if entry["path"].endswith("/log") else ""  # pods/log: its own grant
        key = (match.group("group") or "", entry["resource"] + log)
        allowed = cluster_wide.get(key, set())
        if match.group("ns") == state:
            allowed = allowed | own.get(key, set())
        assert entry["verb"] in allowed, entry
