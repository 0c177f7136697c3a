"""One recorded training on the real node, shared by the tests that read its record.

``recorded_training`` (session-scoped, registered by ``tests/conftest.py``) runs, once
a session, what a user of the training record does, and keeps what each step showed:

* commit 1: ``fit``, a dist MXJob (scheduler, server, 2 workers) running the training
  image's ``fit.py`` (MXNet's ``Module.fit``, ``dist_sync``, Speedometer, validation)
  at ``--lr 0.1``, and ``loop``, a ``local`` job running ``train.py`` (a custom loop
  printing the opt-in ``MXGITOPS_PROGRESS`` line), both at once; beside them
  ``broken``, a ``local`` job whose container prints two epochs of ``Module.fit``'s
  lines, then hostile ones (``<script>``, markdown, chat mentions), and exits 3
  (``restartPolicy: Never``: Failed, its log tail kept), and ``waiting``, a queued
  MXJob naming a Kueue LocalQueue whose ClusterQueue has no room for it: Queued the
  whole run, with Kueue's reason (JobSet and Kueue run on the node for this fixture
  only, uninstalled before it yields, as ``node_ecosystem`` does after its module);
* a sync while ``fit`` trains (once worker 0's log shows an epoch's validation, not
  the last), and ``status -o json`` after it;
* once both jobs' pods ended, a sync that records the end, and ``status -o json``;
* commit 2: ``fit`` at ``--lr 0.05``, a second run, synced, waited for, synced again.

Every sync tells a loopback Slack of failed jobs (``tests/helpers/chatserver.py``): what
it received is kept too, for the notifications' test on the real node.

What it keeps is values (logs, pods, notes, status outputs), taken before any other
test wipes the node: the pods are gone by then, the notes stay in the remote. The
dashboard's browser tests (``tests/dashboard/test_browser_real.py``) serve that remote.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.ecosystem.fixtures import Ecosystem
from tests.gitrepos.fixtures import GitRemote, isolate_git, new_git_remote
from tests.helpers.chatserver import Received, chat_server, notifications_file
from tests.helpers.node import (
    NS,
    cli,
    condition,
    log_of,
    pods_of,
    queued_mxjob,
    sync_args,
    training_container,
)

EPOCHS = 5
FIT, LOOP, BROKEN, WAITING = "fit", "loop", "broken", "waiting"
BROKEN_EPOCHS = 4  # declared by its annotation; it prints two, then fails
HOSTILE_LINES = (
    "<script>document.body.dataset.owned='yes'</script>",
    "**not bold**",
    "# Not a heading",
    "[x](javascript:alert(1))",
    "@channel <!here>",
)
BROKEN_EXIT = 3
FULL_QUEUE = "full"  # its ClusterQueue's quota: less CPU than one pod of waiting's six
CPU = "200m"  # per pod: CPU-core-hours large enough to compare at 4 decimals
RUN_TIMEOUT = 240.0  # image start, MXNet's import on a busy machine, 5 epochs of 3 s


def fit_manifest(lr: float) -> str:
    """``fit``: a dist job of ``fit.py`` at learning rate ``lr``, its epochs declared in
    its command (``--num-epochs``)."""
    command = ["python3", "/opt/mxtrain/fit.py", "--lr", str(lr), "--num-epochs", str(EPOCHS)]
    return _manifest(FIT, "dist", [("SCHEDULER", 1), ("SERVER", 1), ("WORKER", 2)], command)


def loop_manifest() -> str:
    return _manifest(LOOP, "local", [("WORKER", 1)], ["python3", "/opt/mxtrain/train.py"])


def broken_script() -> str:
    """What ``broken``'s container runs: MXNet's lines of two epochs, the hostile lines
    (each quoted for the shell), exit 3."""
    epochs = [
        f"INFO Epoch[{epoch}] {line}"
        for epoch, accuracy in ((0, "0.41"), (1, "0.52"))
        for line in (
            f"Train-accuracy={accuracy}",
            "Time cost=1.5",
            f"Validation-accuracy={accuracy}",
        )
    ]
    lines = [*epochs, *HOSTILE_LINES]
    quoted = ["'" + line.replace("'", "'\\''") + "'" for line in lines]
    return "; ".join(f"echo {line}" for line in quoted) + f"; exit {BROKEN_EXIT}"


def broken_manifest() -> str:
    annotations = {"mxgitops.io/epochs": str(BROKEN_EPOCHS)}
    command = ["sh", "-c", broken_script()]
    return _manifest(BROKEN, "local", [("WORKER", 1)], command, "10m", annotations)


def _manifest(
    name: str,
    mode: str,
    replicas: list[tuple[str, int]],
    command: list[str],
    cpu: str = CPU,
    annotations: dict[str, str] | None = None,
) -> str:
    container = training_container() | {
        "command": command,
        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
    }
    template: dict[str, Any] = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    specs = [
        {"replicas": count, "mxReplicaType": kind, "template": template} for kind, count in replicas
    ]
    return yaml.safe_dump(
        {
            "apiVersion": "mxnet.mlkube.io/v1beta1",
            "kind": "MxJob",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"jobMode": mode, "replicaSpecs": specs},
        }
    )


@dataclass(frozen=True)
class EndedRun:
    """One run as it ended: its pods (their final status) and worker 0's whole log."""

    pods: list[dict[str, Any]]
    worker0_log: str

    @property
    def runtime_id(self) -> str:
        return str(self.pods[0]["metadata"]["labels"]["runtime_id"])


@dataclass(frozen=True)
class RecordedTraining:
    remote: GitRemote
    cache: Path
    first: str  # commit 1's sha: fit at --lr 0.1, loop, broken and waiting
    second: str  # commit 2's: fit at --lr 0.05 (broken and waiting unchanged)
    during: dict[str, Any]  # status -o json after the sync while fit trained
    worker0_during: str  # worker 0's log as the test saw it just before that sync
    after_first: dict[str, Any]  # status -o json once commit 1's runs ended
    after_second: dict[str, Any]  # status -o json once commit 2's run ended
    fit_first: EndedRun
    loop_first: EndedRun
    fit_second: EndedRun
    broken_log: str  # broken's container log as the kubelet served it
    waiting_said: str  # Kueue's word on waiting's Workload (its QuotaReserved condition)
    told: list[Received]  # what the loopback Slack received, over every sync
    history: str  # mxgitops history's table of fit
    history_json: dict[str, Any]  # and its -o json
    seconds: float  # the whole fixture's wall time

    def status_args(self) -> list[str]:
        return ["--repo", self.remote.url, "--cache-dir", str(self.cache / "status")]


def status_json(remote: GitRemote, cache: Path) -> dict[str, Any]:
    out = cli("status", "--repo", remote.url, "--cache-dir", str(cache / "status"), "-o", "json")
    return dict(json.loads(out))


def worker0(pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    labels = [(p, p["metadata"]["labels"]) for p in pods]
    found = [
        p for p, label in labels if (label["job_type"], label["task_index"]) == ("WORKER", "0")
    ]
    return found[0] if len(found) == 1 else None


def ended(cluster: RealCluster, job: str, runtime_id: str | None = None) -> EndedRun:
    """Wait until every pod of ``job``'s run (``runtime_id``'s, or its only one) ended
    Succeeded; its pods and worker 0's log."""

    def pods_now() -> list[dict[str, Any]]:
        pods = pods_of(cluster, job)
        return [p for p in pods if runtime_id in (None, p["metadata"]["labels"]["runtime_id"])]

    def all_succeeded() -> list[dict[str, Any]] | None:
        pods = pods_now()
        phases = {p["metadata"]["name"]: p["status"].get("phase") for p in pods}
        if any(phase == "Failed" for phase in phases.values()):
            logs = "\n".join(f"--- {p['metadata']['name']}\n{log_of(cluster, p)}" for p in pods)
            raise AssertionError(f"a replica of {job} failed: {phases}\n{logs}")
        done = pods and all(phase == "Succeeded" for phase in phases.values())
        return pods if done and worker0(pods) is not None else None

    try:
        pods = wait_for(f"{job}'s pods to succeed", all_succeeded, timeout=RUN_TIMEOUT)
    except TimeoutError as timeout:
        raise AssertionError(f"{timeout}; its pods: {_described(pods_now())}") from None
    pod = worker0(pods)
    assert pod is not None
    return EndedRun(pods, log_of(cluster, pod))


def _described(pods: list[dict[str, Any]]) -> str:
    return json.dumps(
        [{"name": p["metadata"]["name"], "status": p.get("status")} for p in pods], indent=1
    )


def failed_log(cluster: RealCluster, job: str) -> str:
    """Once ``job``'s one pod Failed, its container's log."""

    def failed_pod() -> dict[str, Any] | None:
        pods = pods_of(cluster, job)
        return pods[0] if len(pods) == 1 and pods[0]["status"].get("phase") == "Failed" else None

    return log_of(cluster, wait_for(f"{job}'s pod to fail", failed_pod, timeout=RUN_TIMEOUT))


def kueue_holds(eco: Ecosystem, job: str) -> str:
    """Once Kueue judged ``job``'s Workload and reserved it no quota, what it said."""

    def said() -> str | None:
        for workload in eco.workloads(NS):
            owners = workload["metadata"].get("ownerReferences") or []
            # the JobSet of the job's run: `{job}-{runtimeId}`
            if not any(o["kind"] == "JobSet" and o["name"].startswith(f"{job}-") for o in owners):
                continue
            reserved = [
                c
                for c in workload.get("status", {}).get("conditions") or []
                if c["type"] == "QuotaReserved"
            ]
            if reserved and reserved[0]["status"] == "False" and reserved[0].get("message"):
                assert condition(workload, "Admitted") is None, workload
                return str(reserved[0]["message"])
        return None

    try:
        return wait_for(f"Kueue to hold {job} for want of quota", said, timeout=RUN_TIMEOUT)
    except TimeoutError as timeout:
        shown = [{"metadata": w["metadata"], "status": w.get("status")} for w in eco.workloads()]
        raise AssertionError(f"{timeout}; the workloads: {json.dumps(shown, indent=1)}") from None


@contextmanager
def queue_without_room(real_node: RealCluster, directory: Path) -> Iterator[Ecosystem]:
    """JobSet and Kueue on the node, with the LocalQueue ``FULL_QUEUE`` of a ClusterQueue
    too small for ``waiting``; every object of theirs and they uninstalled on leaving."""
    from tests.ecosystem.addons import Ecosystem as Controllers

    controllers = Controllers(real_node.plane, directory)
    try:
        controllers.start()
        eco = Ecosystem(real_node)
        wait_for("Kueue's and JobSet's resources to be served", eco.served, timeout=120)
        eco.queue(FULL_QUEUE, NS, {"cpu": "10m", "memory": "1Gi"})
        yield eco
        eco.wipe()  # while the controllers run: they clear their objects' finalizers
    finally:
        controllers.uninstall()


def first_epoch_validated(cluster: RealCluster) -> str:
    """Worker 0's log of ``fit`` once it shows epoch 1's validation line."""

    def log_now() -> str | None:
        pod = worker0(pods_of(cluster, FIT))
        if pod is None or pod["status"].get("phase") != "Running":
            return None
        text = log_of(cluster, pod)
        return text if "Epoch[0] Validation-accuracy=" in text else None

    return wait_for("fit's worker 0 to validate an epoch", log_now, timeout=RUN_TIMEOUT)


@pytest.fixture(scope="session")
def recorded_training(
    real_node: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RecordedTraining]:
    directory = tmp_path_factory.mktemp("recorded")
    real_node.wipe()
    real_node.clear_log()
    started = time.monotonic()
    with (
        pytest.MonkeyPatch.context() as environment,
        queue_without_room(real_node, directory / "controllers") as eco,
        chat_server() as chat,
    ):
        isolate_git(environment, directory)
        environment.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        remote = new_git_remote(
            directory,
            "jobs",
            files={
                "jobs/fit.yaml": fit_manifest(0.1),
                "jobs/loop.yaml": loop_manifest(),
                "jobs/broken.yaml": broken_manifest(),
                "jobs/waiting.yaml": queued_mxjob(WAITING, FULL_QUEUE),
            },
        )
        first, cache = remote.rev(), directory / "cache"
        (directory / "notify").mkdir()
        told_to = notifications_file(directory / "notify", chat.url, "slack", events=["failed"])

        def sync() -> None:
            args = sync_args(remote, real_node, cache)
            print(cli("sync", *args, "--notifications-file", str(told_to)))

        sync()
        seen = first_epoch_validated(real_node)
        assert f"Epoch[{EPOCHS - 1}] Validation" not in seen, "fit ended before a sync"
        sync()
        during = status_json(remote, cache)
        fit_first, loop_first = ended(real_node, FIT), ended(real_node, LOOP)
        broken_log = failed_log(real_node, BROKEN)
        waiting_said = kueue_holds(eco, WAITING)
        sync()  # sees fit and loop ended (the last read of each, the record's end), broken
        # failed (its log's tail kept) and waiting held by Kueue
        after_first = status_json(remote, cache)

        second = remote.commit({"jobs/fit.yaml": fit_manifest(0.05)}, "fit: learning rate 0.05")
        sync()  # replaces fit's finished run with a new one
        rerun = wait_for(
            "fit's second run",
            lambda: (
                {p["metadata"]["labels"]["runtime_id"] for p in pods_of(real_node, FIT)}
                - {fit_first.runtime_id}
            ),
            timeout=RUN_TIMEOUT,
        )
        (runtime_id,) = rerun
        fit_second = ended(real_node, FIT, runtime_id)
        sync()
        after_second = status_json(remote, cache)
        shown = ["history", "--repo", remote.url, "--cache-dir", str(cache / "status")]
        history = cli(*shown, f"{NS}/{FIT}")
        history_json = json.loads(cli(*shown, "-o", "json", f"{NS}/{FIT}"))
    yield RecordedTraining(
        remote=remote,
        cache=cache,
        first=first,
        second=second,
        during=during,
        worker0_during=seen,
        after_first=after_first,
        after_second=after_second,
        fit_first=fit_first,
        loop_first=loop_first,
        fit_second=fit_second,
        broken_log=broken_log,
        waiting_said=waiting_said,
        told=list(chat.requests),
        history=history,
        history_json=history_json,
        seconds=time.monotonic() - started,
    )
