"""The CronJob as a user installs it, run by the real CronJob controller on the real node,
on its schedule.

A user's overlay over ``cronjob/overlays/example`` sets two things, the image (the
project's own, built from its Dockerfile: ``tests/controlplane/projectimage.py``)
and the repository URL (a Git server on the host's end of the node's network, which
pods reach); ``kubectl apply -k`` installs everything else exactly as rendered:
namespace (Pod Security ``restricted`` enforced), ServiceAccount, RBAC, ConfigMap,
PersistentVolumeClaim, CronJob, whose schedule stays the base's ``*/5``. As a cluster
admin would, the installation provides what the cluster must: a PersistentVolume for
the Git cache's claim and the Secret with the Git token (``mxgitops-git``).

The first two scheduled runs take up to ten minutes of wall time, and the rest of the
suite covers the wait: the installation is a session fixture, made for the session's
first test (``first_in_session``, which checks it is installed as rendered), and the
runs are checked by its last (``last_in_session``; ``tests/session/order.py``). The
other real-node tests wipe the cluster in between, leaving the installation's two
namespaces alone (``RealCluster.keeping``). The CronJob keeps only three finished
Jobs, and their pods and logs go with them, so a recorder thread keeps each of the
first two runs as it finishes: its Job, its pod, ``kubectl logs`` of it.

The first run's pod, non-root with a read-only root filesystem, reads its in-cluster
config from the projected token, fetches the repository, creates the job and pushes
the note. The second run, scheduled too, is a no-op: 4 requests in the audit log,
read from the installation's offset and attributed to each run by the pod name its
projected token carries. ``kubectl logs`` of each run shows its summary. A run the
controller could not start within ``startingDeadlineSeconds`` of its time is skipped
and never comes: each run is awaited until then (and then for as long as a run
takes), and one that did not come is named. Selected alone, the runs test installs
and waits for both.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import RealCluster
from tests.controlplane.images import TOOLBOX_IMAGE
from tests.gitrepos.fixtures import GitHttpServer, GitRemote, isolate_git, new_git_remote
from tests.helpers.cronjobruns import (
    Run,
    RunRecorder,
    ended,
    kubectl,
    period_of,
    requests_of,
    scheduled_run,
)
from tests.helpers.node import (
    CRONJOB,
    NAMESPACE,
    TOKEN,
    cache_volume,
    git_secret,
    user_overlay,
)

ROOT = Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "cronjob" / "base" / "cronjob.yaml").read_text())["spec"]
ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{CRONJOB}"
JOBS_NAMESPACE = "ml-training"  # the jobs repository's; no other real-node test uses it
RUN_TIMEOUT = 180.0  # from a run's start to its end: the pod starts, syncs and exits
INSTALL_TIMEOUT = 300.0  # the real node's start (the session's first use) and the install
# Selected alone, the runs test installs, then waits up to two periods for the second
# run's time, up to startingDeadlineSeconds for its start and RUN_TIMEOUT for its end.
PERIOD = period_of(BASE["schedule"])
RUNS_TIMEOUT = float(
    INSTALL_TIMEOUT + 2 * PERIOD.total_seconds() + BASE["startingDeadlineSeconds"] + RUN_TIMEOUT
)


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


@dataclass(frozen=True)
class Installation:
    cluster: RealCluster
    remote: GitRemote
    rendered: list[dict[str, Any]]  # kubectl kustomize of the user's overlay
    overlay: Path
    kubeconfig: Path  # the cluster admin's, for kubectl
    audit_offset: int  # where the audit log stood before the installation
    recorder: RunRecorder

    def cronjob(self) -> dict[str, Any]:
        status, _, live = self.cluster.raw(
            "GET", f"/apis/batch/v1/namespaces/{NAMESPACE}/cronjobs/{CRONJOB}"
        )
        assert status == 200, live
        return dict(live)

    def requests_of(self, pod: dict[str, Any]) -> list[dict[str, Any]]:
        """What ``pod``, a run's, asked the API server (the audit log since installation)."""
        log, name = self.cluster.audit_log, pod["metadata"]["name"]
        return requests_of(log, self.audit_offset, ACCOUNT, name)


@pytest.fixture(scope="session")
def installation(
    real_node: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installation]:
    """The overlay installed on the real node for the rest of the session, its two
    namespaces kept from the other tests' wipes, its first two runs recorded."""
    directory = tmp_path_factory.mktemp("cronjob")
    with pytest.MonkeyPatch.context() as git_environment:
        isolate_git(git_environment, directory)
        remote = new_git_remote(
            directory,
            "jobs",
            files={
                ".mxgitops.yaml": f"namespace: {JOBS_NAMESPACE}\npath: jobs\n",
                "jobs/sleeper.yaml": sleeper_job(),
            },
        )
    server = GitHttpServer(
        root=remote.bare.parent,
        logins={("x-access-token", TOKEN)},
        host=real_node.plane.bind_address,
    )
    server.start()
    plane = real_node.plane
    kubeconfig = plane.kubeconfig(directory / "kubeconfig", user=plane.admin)
    overlay = user_overlay(directory / "overlay", server.url("jobs"))
    made_volume = False
    try:
        with real_node.keeping(frozenset({NAMESPACE, JOBS_NAMESPACE})):
            offset = real_node.audit_log.stat().st_size
            git_secret(real_node)
            cache_volume(real_node, directory / "cache-volume")
            made_volume = True
            kubectl(kubeconfig, "apply", "-k", str(overlay))
            rendered = list(yaml.safe_load_all(kubectl(kubeconfig, "kustomize", str(overlay))))
            with RunRecorder(real_node, kubeconfig, NAMESPACE, CRONJOB, count=2) as recorder:
                yield Installation(
                    real_node, remote, rendered, overlay, kubeconfig, offset, recorder
                )
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
        server.stop()
        if made_volume:
            real_node.raw("DELETE", "/api/v1/persistentvolumes/mxgitops-cache-node-test")


@pytest.mark.first_in_session
@pytest.mark.timeout(INSTALL_TIMEOUT)
def test_the_cronjob_is_installed_exactly_as_rendered(installation: Installation) -> None:
    listed = kubectl(installation.kubeconfig, "get", "-k", str(installation.overlay), "-o", "json")
    live = {(o["kind"], o["metadata"]["name"]) for o in json.loads(listed)["items"]}
    assert live == {(d["kind"], d["metadata"]["name"]) for d in installation.rendered}

    (cronjob,) = [d for d in installation.rendered if d["kind"] == "CronJob"]
    installed = installation.cronjob()
    for key, value in cronjob["spec"].items():  # schedule, concurrency, deadline, history
        if key != "jobTemplate":
            assert installed["spec"][key] == value, (key, installed["spec"][key], value)
    assert cronjob["spec"]["schedule"] == BASE["schedule"]  # the user's overlay kept it
    _same_containers(installed, cronjob)  # image, command, securityContext


@pytest.mark.last_in_session
@pytest.mark.timeout(RUNS_TIMEOUT)
def test_its_first_two_scheduled_runs_sync_and_then_do_nothing(installation: Installation) -> None:
    recorder, cronjob = installation.recorder, installation.cronjob
    first = scheduled_run(recorder, cronjob, 0, RUN_TIMEOUT)
    check_first_run(installation, first)
    second = scheduled_run(recorder, cronjob, 1, RUN_TIMEOUT)
    check_no_op_run(installation, second)


def check_first_run(installation: Installation, run: Run) -> None:
    """It started on schedule, created the job and pushed the note, from a pod as
    hardened as the manifests say."""
    cluster, remote = installation.cluster, installation.remote
    assert ended(run.job) == "Complete", f"the run {run.name} failed: {run.job['status']}"
    owners = [o["kind"] for o in run.job["metadata"].get("ownerReferences", [])]
    assert owners == ["CronJob"], run.job["metadata"]  # started by the CronJob controller
    print(run.log)
    assert "sleeper" in run.log, run.log
    jobs = [j["metadata"]["name"] for j in cluster.objects("jobs", JOBS_NAMESPACE)]
    assert any(name.startswith("sleeper-worker-") for name in jobs), jobs
    note = remote.note(remote.rev())
    assert note is not None and "sleeper" in note, note

    (pod,) = run.pods
    assert "kube-api-access" in json.dumps(pod["spec"]["volumes"])  # the projected token
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["spec"]["securityContext"]["runAsUser"] == 10001
    namespace = cluster.rest.get(f"/api/v1/namespaces/{NAMESPACE}")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"

    requests_made = installation.requests_of(pod)
    assert {e["user"] for e in requests_made} == {ACCOUNT}
    created = {(e["verb"], e["path"]) for e in requests_made if e["status"] == 201}
    assert ("create", f"/apis/batch/v1/namespaces/{JOBS_NAMESPACE}/jobs") in created, created


def check_no_op_run(installation: Installation, run: Run) -> None:
    """Scheduled too, it finds nothing to do: 4 LISTs and the running job's log read, nothing
    written."""
    assert ended(run.job) == "Complete", f"the run {run.name} failed: {run.job['status']}"
    owners = [o["kind"] for o in run.job["metadata"].get("ownerReferences", [])]
    assert owners == ["CronJob"], run.job["metadata"]
    print(run.log)
    assert "1 unchanged" in run.log, run.log
    (pod,) = run.pods
    made = installation.requests_of(pod)
    assert {e["user"] for e in made} == {ACCOUNT}
    # A no-op sync: its 4 LISTs (ledger, jobs, services, pods) and nothing written; no
    # JobSets LIST, as the ledger the first run made records that it never ran a JobSet.
    # The running job's training record: one bounded read of its worker 0's log.
    logs = [e for e in made if e["path"].endswith("/log")]
    assert [(e["verb"], e["status"]) for e in logs] == [("get", 200)], logs
    assert re.search(r"/pods/sleeper-worker-[a-z0-9]+-0-[a-z0-9]+/log$", logs[0]["path"]), logs
    made = [e for e in made if e not in logs]
    assert sorted((e["verb"], e["path"], e["status"]) for e in made) == [
        ("list", "/api/v1/namespaces/mxgitops-example/configmaps", 200),
        ("list", "/api/v1/pods", 200),
        ("list", "/api/v1/services", 200),
        ("list", "/apis/batch/v1/jobs", 200),
    ], json.dumps(made, indent=1)
    print(f"the no-op run made {len(made)} requests")


def _same_containers(live: dict[str, Any], rendered: dict[str, Any]) -> None:
    """The live CronJob's containers hold every field as rendered (the server adds
    defaults such as terminationMessagePath)."""

    def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
        return list(obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"])

    for mine, theirs in zip(containers(rendered), containers(live), strict=True):
        for key, value in mine.items():
            assert theirs.get(key) == value or key == "resources", (key, value, theirs.get(key))
