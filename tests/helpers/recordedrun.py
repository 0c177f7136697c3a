"""One recorded training on the real node, shared by the tests that read its record.

``recorded_training`` (session-scoped, registered by ``tests/conftest.py``) runs, once
a session, what a user of the training record does, and keeps what each step showed:

* commit 1: ``fit``, a dist MXJob (scheduler, server, 2 workers) running the training
  image's ``fit.py`` (MXNet's ``Module.fit``, ``dist_sync``, Speedometer, validation)
  at ``--lr 0.1``, and ``loop``, a ``local`` job running ``train.py`` (a custom loop
  printing the opt-in ``MXGITOPS_PROGRESS`` line), both at once;
* a sync while ``fit`` trains (once worker 0's log shows an epoch's validation, not
  the last), and ``status -o json`` after it;
* once both jobs' pods ended, a sync that records the end, and ``status -o json``;
* commit 2: ``fit`` at ``--lr 0.05``, a second run, synced, waited for, synced again.

What it keeps is values (logs, pods, notes, status outputs), taken before any other
test wipes the node: the pods are gone by then, the notes stay in the remote.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.harness import RealCluster, wait_for
from tests.gitrepos.fixtures import GitRemote, isolate_git, new_git_remote
from tests.helpers.node import NS, cli, log_of, pods_of, sync_args, training_container

EPOCHS = 5
FIT, LOOP = "fit", "loop"
CPU = "200m"  # per pod: CPU-core-hours large enough to compare at 4 decimals
RUN_TIMEOUT = 240.0  # image start, MXNet's import on a busy machine, 5 epochs of 3 s


def fit_manifest(lr: float) -> str:
    """``fit``: a dist job of ``fit.py`` at learning rate ``lr``, its epochs declared in
    its command (``--num-epochs``)."""
    command = ["python3", "/opt/mxtrain/fit.py", "--lr", str(lr), "--num-epochs", str(EPOCHS)]
    return _manifest(FIT, "dist", [("SCHEDULER", 1), ("SERVER", 1), ("WORKER", 2)], command)


def loop_manifest() -> str:
    return _manifest(LOOP, "local", [("WORKER", 1)], ["python3", "/opt/mxtrain/train.py"])


def _manifest(name: str, mode: str, replicas: list[tuple[str, int]], command: list[str]) -> str:
    container = training_container() | {
        "command": command,
        "resources": {"requests": {"cpu": CPU, "memory": "64Mi"}},
    }
    specs = [
        {
            "replicas": count,
            "mxReplicaType": kind,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        }
        for kind, count in replicas
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
    first: str  # commit 1's sha: fit at --lr 0.1, and loop
    second: str  # commit 2's: fit at --lr 0.05
    during: dict[str, Any]  # status -o json after the sync while fit trained
    worker0_during: str  # worker 0's log as the test saw it just before that sync
    after_first: dict[str, Any]  # status -o json once commit 1's runs ended
    after_second: dict[str, Any]  # status -o json once commit 2's run ended
    fit_first: EndedRun
    loop_first: EndedRun
    fit_second: EndedRun
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
    with pytest.MonkeyPatch.context() as environment:
        isolate_git(environment, directory)
        environment.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        remote = new_git_remote(
            directory,
            "jobs",
            files={"jobs/fit.yaml": fit_manifest(0.1), "jobs/loop.yaml": loop_manifest()},
        )
        first, cache = remote.rev(), directory / "cache"

        def sync() -> None:
            print(cli("sync", *sync_args(remote, real_node, cache)))

        sync()
        seen = first_epoch_validated(real_node)
        assert f"Epoch[{EPOCHS - 1}] Validation" not in seen, "fit ended before a sync"
        sync()
        during = status_json(remote, cache)
        fit_first, loop_first = ended(real_node, FIT), ended(real_node, LOOP)
        sync()  # sees both ended: the last read of each, the record's end
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
        history=history,
        history_json=history_json,
        seconds=time.monotonic() - started,
    )
