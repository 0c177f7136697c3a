"""The RBAC that cronjob/ grants is sufficient and minimal, judged by the real authorizer.

A full round of syncs (create, names taken by a foreign Job and Service found out by a read,
the ledger created (its answer lost, the retry's 409 settled by a read) and updated, a
failed container's log read, a dist job's pod evicted and gone (its Events read),
replace, suspend and on-change annotation in place, repair, prune, the Lease each time)
runs as the CronJob's ServiceAccount, with exactly the Role and ClusterRole of the
rendered example overlay:
every sync succeeds. Then each granted verb is taken away in turn, and the round must
fail on it with a one-line "forbidden" message that names it: no verb is granted that
mxgitops does not use.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.manifests import spec
from mxgitops.outputs.events import LASTING
from mxgitops.runtimes.batch.render import render_job
from mxgitops.runtimes.shared.disruption import departed_pod
from mxgitops.runtimes.shared.podtemplate import RenderContext
from tests.controlplane.harness import RealCluster, wait_for
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.cronjob import CronJobRun, Docs, environment, install, rendered
from tests.helpers.policy import role_path, without

__all__ = ["environment", "rendered"]  # fixtures of the CronJob test, used here too

NS = "ml-training"
NOT_OURS = "not managed by this mxgitops instance"


def mxjob(
    name: str,
    workers: int = 1,
    servers: int = 1,
    args: str = "train.py",
    suspend: bool = False,
    wait: bool = False,
) -> str:
    container = {"name": "mxnet", "image": "mxnet/python:1.9.1", "args": [args]}
    replica = {"restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}
    replicas = {"Worker": {**replica, "replicas": workers}}
    if servers:
        replicas |= {
            "Scheduler": {**replica, "replicas": 1},
            "Server": {**replica, "replicas": servers},
        }
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name},
        "spec": {"jobMode": "MXTrain", "mxReplicaSpecs": replicas},
    }
    if suspend:
        doc["spec"]["runPolicy"] = {"suspend": True}
    if wait:
        doc["metadata"]["annotations"] = {"mxgitops.io/on-change": "wait"}
    return yaml.safe_dump(doc)


class Round:
    """The syncs of one round, run as the CronJob runs them, stopping at the first failure."""

    def __init__(
        self,
        real: RealCluster,
        docs: Docs,
        remote: GitRemote,
        token: Path,
        tmp: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        self.real, self.docs, self.remote, self.tmp = real, docs, remote, tmp
        self.monkeypatch = monkeypatch
        self.token = token
        self.runs = 0
        tmp.mkdir(parents=True)

    def __call__(self) -> tuple[int, str] | None:
        """None if every sync did what it should, else the odd one's exit code and output."""
        remote, real = self.remote, self.real
        jobs = {
            "a": mxjob("a"),
            "b": mxjob("b", servers=0),
            "c": mxjob("c", servers=0),
            "d": mxjob("d", servers=0),
            "e": mxjob("e"),
            "f": mxjob("f"),
        }
        remote.commit({f"jobs/{name}.yaml": text for name, text in jobs.items()}, "six jobs")
        # d's batch Job name and e's scheduler Service name are taken by foreign objects:
        # each create meets 409, the read that follows finds it is not ours, and the job
        # is reported, not taken over.
        taken = (rendered_name(jobs["d"], "Job"), rendered_name(jobs["e"], "Service"))
        real.create(squatter("Job", taken[0]), NS)
        real.create(squatter("Service", taken[1]), NS)
        if failed := self._step(reported=taken, code=1):
            return failed
        real.run_job_controller(NS)
        # b succeeds: the ledger (made by the first sync, to record the runtimes in use)
        # is updated, and the answer to that update is lost, so the retry meets 409 and
        # reads the ConfigMap to recognise its own write.
        real.kubelet(job=self._batch_job("b-worker-"), namespace=NS, phase="Succeeded")
        real.faults("update/configmaps:lose=1x1")
        proxied = self.tmp / "proxied.kubeconfig"
        config = yaml.safe_load(self.token.read_text())
        config["clusters"][0]["cluster"]["server"] = real.proxy_url
        proxied.write_text(yaml.safe_dump(config))
        # An hour later d and e are reported again: what was said of them is read back
        # (get events) and its series updated (patch events), not said again.
        self._said_an_hour_ago()
        try:
            if failed := self._step(kubeconfig=proxied, reported=taken, code=1):
                return failed
        finally:
            real.direct()
        remote.commit({"jobs/d.yaml": None, "jobs/e.yaml": None}, "d and e go")
        # c fails: the ledger is updated, and the failed container's log is read.
        worker = self._batch_job("c-worker-")
        real.container_log(job=worker, namespace=NS, text="epoch 3\nloss is NaN\n")
        real.kubelet(job=worker, namespace=NS, phase="Failed", exit_code=1, message="loss is NaN")
        # f (dist) loses its worker to a drain, and the pod is gone: the sync reads its
        # Events to say how, and runs f again whole.
        self._evict_gone(self._batch_job("f-worker-"))
        if failed := self._step():
            return failed
        remote.commit({"jobs/a.yaml": mxjob("a", args="train.py --epochs=9")}, "replace a")
        if failed := self._step():
            return failed
        # Suspended, and told to wait on changes, in place: its batch Jobs and its
        # Service are patched, not replaced.
        paused = mxjob("a", args="train.py --epochs=9", suspend=True, wait=True)
        remote.commit({"jobs/a.yaml": paused}, "pause a")
        if failed := self._step():
            return failed
        # The annotation goes again (patched back), and a batch Job deleted by hand
        # comes back (repair).
        remote.commit({"jobs/a.yaml": mxjob("a", args="train.py --epochs=9", suspend=True)})
        path = f"/apis/batch/v1/namespaces/{NS}/jobs/{self._batch_job('a-worker-')}"
        status, _, body = real.raw("DELETE", path, {"propagationPolicy": "Background"})
        assert status == 200, body
        if failed := self._step():
            return failed
        remote.commit({"jobs/a.yaml": None}, "prune a")
        return self._step()

    def _said_an_hour_ago(self) -> None:
        """Move the series of every lasting Event of the namespace an hour back."""
        path = f"/apis/events.k8s.io/v1/namespaces/{NS}/events"
        status, _, listed = self.real.raw("GET", path)
        assert status == 200, listed
        lasting = [e for e in listed["items"] if e["reason"] in LASTING]
        assert lasting, [e["reason"] for e in listed["items"]]
        hour_ago = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for event in lasting:
            series = {"series": {"count": 2, "lastObservedTime": hour_ago}}
            name = event["metadata"]["name"]
            status, _, body = self.real.raw(
                "PATCH", f"{path}/{name}", series, "application/merge-patch+json"
            )
            assert status == 200, body

    def _evict_gone(self, job: str) -> None:
        """Evict the batch Job's pod through the Eviction API (which sets DisruptionTarget),
        let it fail and be gone, until the Job is failed by its FailJob rule."""
        real = self.real
        (pod,) = real.kubelet(job=job, namespace=NS, phase="Running")
        name = pod["metadata"]["name"]
        path = f"/api/v1/namespaces/{NS}/pods/{name}"
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": NS},
        }
        status, _, body = real.raw("POST", f"{path}/eviction", eviction)
        assert status == 201, body
        real.kubelet(name, namespace=NS, phase="Failed", exit_code=137, reason="Error")
        status, _, body = real.raw("DELETE", path, {"gracePeriodSeconds": 0})
        assert status in (200, 404), body

        def failed_and_gone() -> bool:
            status, _, _ = real.raw("GET", path)
            batch = real.get("Job", job, NS) or {}
            return status == 404 and departed_pod(batch) == (NS, name)

        wait_for(f"for {job} to fail on its evicted pod {name}", failed_and_gone)

    def _batch_job(self, prefix: str) -> str:
        (name,) = [
            o["metadata"]["name"]
            for o in self.real.objects("jobs", NS)
            if o["metadata"]["name"].startswith(prefix)
            and o["metadata"]["labels"].get("app") != "squatter"
        ]
        return name

    def _step(
        self, reported: tuple[str, ...] = (), code: int = 0, kubeconfig: Path | None = None
    ) -> tuple[int, str] | None:
        self.runs += 1
        run = CronJobRun(
            self.docs, self.remote, kubeconfig or self.token, self.tmp / f"run{self.runs}"
        )
        self.real.settle()
        result = run(self.monkeypatch)
        # A step is odd when it ends otherwise than it should, or says it was forbidden
        # something even if it ended well (a Lease it could not give back).
        odd = (
            result.exit_code != code
            or "forbidden" in result.output.lower()
            or not all(
                any(name in line and NOT_OURS in line for line in result.output.splitlines())
                for name in reported
            )
        )
        return (result.exit_code, result.output) if odd else None


def rendered_name(manifest: str, kind: str) -> str:
    """The name mxgitops gives the job's first object of ``kind``."""
    job = spec.from_manifest(yaml.safe_load(manifest), default_namespace=NS)
    name: str = next(
        o["metadata"]["name"]
        for o in render_job(job, RenderContext(instance="x"))
        if o["kind"] == kind
    )
    return name


def squatter(kind: str, name: str) -> dict[str, Any]:
    metadata = {"name": name, "labels": {"app": "squatter"}}
    if kind == "Service":
        port = {"port": 9091, "targetPort": 9091}
        return {"apiVersion": "v1", "kind": kind, "metadata": metadata, "spec": {"ports": [port]}}
    container = {"name": "main", "image": "busybox"}
    template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    return {
        "apiVersion": "batch/v1",
        "kind": kind,
        "metadata": metadata,
        "spec": {"template": template},
    }


# A round of up to seven CronJob syncs for every verb granted: 120 s in a run beside
# three other test sessions, the default timeout.
@pytest.mark.timeout(300)
def test_granted_rbac_is_sufficient_and_minimal(
    control_plane: RealCluster,
    rendered: Docs,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = control_plane
    real.wipe()
    token = tmp_path / "token.kubeconfig"
    made = install(real, rendered, token)
    roles = [d for d in rendered if d["kind"] in ("Role", "ClusterRole")]
    remote = make_git_remote("jobs", files={".mxgitops.yaml": f"namespace: {NS}\npath: jobs\n"})
    account = next(d for d in rendered if d["kind"] == "ServiceAccount")["metadata"]
    user = f"system:serviceaccount:{account['namespace']}:{account['name']}"

    def fresh_round(name: str) -> Round:
        real.wipe()
        remote.git("rm", "-rq", "--ignore-unmatch", "jobs")
        remote.commit({}, f"no jobs before the round {name}")
        return Round(real, rendered, remote, token, tmp_path / name, monkeypatch)

    try:
        failed = fresh_round("all")()
        assert failed is None, f"with every rule granted, a sync failed: {failed}"
        for role in roles:
            for index, rule in enumerate(role["rules"]):
                for verb in rule["verbs"]:
                    (resource,), (group,) = rule["resources"], rule["apiGroups"]
                    what = f"{verb} {resource}"
                    real.rest.put(role_path(role), without(role, index, verb))
                    wait_denied(real, user, verb, resource, group, account["namespace"])
                    try:
                        failed = fresh_round(f"{verb}-{resource}")()
                    finally:
                        real.rest.put(
                            role_path(role),
                            {**role, "metadata": real.rest.get(role_path(role))["metadata"]},
                        )
                    assert failed is not None, f"{what} is granted, yet no sync needed it"
                    code, output = failed
                    lines = [ln for ln in output.splitlines() if "forbidden" in ln.lower()]
                    assert lines, f"without {what}: exit {code}, no 'forbidden' line:\n{output}"
                    assert any(resource in ln for ln in lines), (what, lines)
    finally:
        for path in made:
            real.raw("DELETE", path)
        real.wipe()


def wait_denied(
    real: RealCluster, user: str, verb: str, resource: str, group: str, namespace: str
) -> None:
    """Wait until the authorizer's cache has the reduced role (a SubjectAccessReview)."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "resourceAttributes": {
                "verb": verb,
                "resource": resource,
                "group": group,
                "namespace": namespace,
            },
        },
    }

    def denied() -> bool:
        answer = real.rest.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        return not answer["status"].get("allowed")

    wait_for(f"for RBAC to deny {verb} {resource}", denied)
