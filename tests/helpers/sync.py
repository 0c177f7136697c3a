"""A sync on a cluster in tests: manifests written, `sync()` run against the API double
or the real control plane, its writes, summary, states and ledger read back; the
same through a Git remote (`git_config`).

The ledger is read and written one shard at a time here, as a small ledger is stored;
the product reads and writes every shard at once (`state/ledgerstore.py`)."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.commands.sync import SyncOutcome, sync
from mxgitops.kube import calls as kubecalls
from mxgitops.kube import cluster
from mxgitops.objects import (
    JOB_NAME_LABEL,
    Kind,
    KubeObject,
    ObjectRef,
)
from mxgitops.outputs.summary import JobSummary
from mxgitops.planning.ledger import Ledger
from mxgitops.settings.config import SyncConfig
from mxgitops.state import ledgerstore
from tests.controlplane.harness import wait_for
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.gitsync import config_for
from tests.kubeapi.clients import raw
from tests.kubeapi.harness import KubeAPI
from tests.kubeapi.resources import resource

NS = "ml"


INSTANCE = "t1"


EXAMPLE_REPO = Path(__file__).resolve().parents[2] / "jobs-repo-example"


WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


RID = r"[0-9a-z]{5}"


RETRY = kubecalls.RetryPolicy(attempts=3, base_delay=0.01, max_delay=2)


def container(args: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": "mxnet", "image": "mxnet/python:1.9.1", "args": args or ["train.py"], **extra}


def mxjob(
    name: str,
    *,
    servers: int = 1,
    workers: int = 2,
    restart: str = "OnFailure",
    args: list[str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Kubeflow MXJob; `servers=0` makes a local job (one worker)."""

    def replica(count: int) -> dict[str, Any]:
        return {
            "replicas": count,
            "restartPolicy": restart,
            "template": {"spec": {"containers": [container(args)]}},
        }

    replicas = {"Worker": replica(workers if servers else 1)}
    if servers:
        replicas = {"Scheduler": replica(1), "Server": replica(servers), **replicas}
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": metadata,
        "spec": {"jobMode": "MXTrain", "mxReplicaSpecs": replicas, **spec},
    }


def write(repo: Path, *docs: dict[str, Any]) -> Path:
    repo.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        (repo / f"{doc['metadata']['name']}.yaml").write_text(yaml.safe_dump(doc))
    return repo


def remove(repo: Path, name: str) -> None:
    (repo / f"{name}.yaml").unlink()


@dataclass
class Syncer:
    """Runs syncs of one repository against one double, sleeping never."""

    api: KubeAPI
    repo: Path
    retry: kubecalls.RetryPolicy = RETRY
    parallelism: int = 4
    sleeps: list[float] = field(default_factory=list)
    # Where the verdict cache goes: beside the repository, unless that is a folder of
    # this checkout or the external corpus (the examples), which a test must not write into.
    cache: Path | None = None

    def config(self, **overrides: Any) -> SyncConfig:
        values: dict[str, Any] = {
            "repo": str(self.repo),
            "kubeconfig": self.api.kubeconfig,
            "namespace": NS,
            "instance": INSTANCE,
            "cache_dir": self.cache or self.repo.parent / "cache",
            "parallelism": self.parallelism,
            # These tests count the writes of jobs' objects; the Events a sync writes
            # have tests of their own (tests/outputs/test_events.py).
            "events": False,
            **overrides,
        }
        return SyncConfig(**values)

    def __call__(self, **overrides: Any) -> SyncOutcome:
        self.api.settle()  # syncs are minutes apart: the controllers have caught up
        connect = functools.partial(cluster.connect, retry=self.retry, sleep=self.sleeps.append)
        # As if given by flag: a jobs repository's .mxgitops.yaml does not override them.
        explicit = frozenset({"namespace", "instance", "parallelism", *overrides})
        return sync(self.config(**overrides), explicit=explicit, connect=connect)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    return path


@pytest.fixture
def run(kubeapi: KubeAPI, repo: Path) -> Syncer:
    return Syncer(kubeapi, repo)


def job_objects(api: KubeAPI, job: str, kind: str = "jobs") -> list[dict[str, Any]]:
    return [
        o
        for o in api.objects(kind, NS)
        if o["metadata"].get("labels", {}).get(JOB_NAME_LABEL) == job
    ]


def batch_job(api: KubeAPI, job: str, role: str, index: int = 0) -> str:
    pattern = re.compile(rf"{re.escape(job)}-{role}-{RID}-{index}")
    (name,) = [
        o["metadata"]["name"]
        for o in job_objects(api, job)
        if pattern.fullmatch(o["metadata"]["name"])
    ]
    return name


def batch_jobs(api: KubeAPI, role: str, index: int = 0) -> dict[str, str]:
    """Each job's batch Job of ``role`` and ``index``, by job name, from one listing."""
    pattern = re.compile(rf"(.+)-{role}-{RID}-{index}")
    found: dict[str, str] = {}
    for obj in api.objects("jobs", NS):
        job = obj["metadata"].get("labels", {}).get(JOB_NAME_LABEL)
        match = pattern.fullmatch(obj["metadata"]["name"])
        if match and match.group(1) == job:
            found[job] = obj["metadata"]["name"]
    return found


def writes(api: KubeAPI) -> list[dict[str, Any]]:
    return [e for e in api.request_log if e["method"] in WRITE_METHODS]


def summary_of(outcome: SyncOutcome, name: str) -> JobSummary:
    return next(j for j in outcome.summary.jobs if j.name == name)


def states(outcome: SyncOutcome, name: str) -> tuple[str, dict[str, str]]:
    job = summary_of(outcome, name)
    return job.state, {r.type: r.state for r in job.replicas}


def delete(api: KubeAPI, kind: str, name: str) -> None:
    res = resource(kind)
    group = f"/apis/{res.group}/{res.version}" if res.group else "/api/v1"
    status, _, body = raw(
        api,
        "DELETE",
        f"{group}/namespaces/{NS}/{res.plural}/{name}",
        {"propagationPolicy": "Background"},
    )
    assert status == 200, body


# A no-op sync of an instance that has never run a JobSet (its ledger says so): the
# ledger (one LIST of its ConfigMaps, however many), then one LIST per kind of object.
NO_OP = [("list", "configmaps"), ("list", "jobs"), ("list", "services"), ("list", "pods")]
# The LISTs a sync makes at once (`kube.reads.at_once`): the server sees them in any order.
AT_ONCE = (("list", "jobs"), ("list", "services"), ("list", "pods"))


def requests_made(log: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(verb, resource) of each request of `log`, in order; the LISTs made at once,
    wherever they come one after another, in `AT_ONCE`'s order."""
    made = [(str(e["verb"]), str(e["resource"])) for e in log]
    ordered: list[tuple[str, str]] = []
    for together, run in itertools.groupby(made, key=lambda r: r in AT_ONCE):
        requests = list(run)
        ordered += sorted(requests, key=AT_ONCE.index) if together else requests
    return ordered


def assert_no_op(api: KubeAPI) -> None:
    assert requests_made(api.request_log) == NO_OP, api.request_log


def finish(api: KubeAPI, job: str, role: str = "scheduler") -> None:
    api.run_job_controller(NS)
    api.kubelet(job=batch_job(api, job, role), namespace=NS, phase="Succeeded")


class HookedBeforeLease(cluster.Cluster):
    """Runs its hook once, when the sync first reads the Lease: between its first read
    of the cluster and its taking the Lease."""

    hooks: list[Callable[[], object]]  # set after construction: not a dataclass field

    def get(self, ref: ObjectRef) -> dict[str, Any] | None:
        if ref.kind is Kind.LEASE and self.hooks:
            self.hooks.pop()()
        return super().get(ref)


def sync_hooked(run: Syncer, before_lease: Callable[[], object]) -> SyncOutcome:
    def connect(**kwargs: Any) -> cluster.Cluster:
        plain = cluster.connect(**kwargs, retry=RETRY, sleep=run.sleeps.append)
        hooked = HookedBeforeLease(
            **{
                f: getattr(plain, f)
                for f in ("api_client", "parallelism", "retry", "sleep", "server")
            }
        )
        hooked.hooks = [before_lease]
        return hooked

    return sync(run.config(), explicit=frozenset({"namespace", "instance"}), connect=connect)


def lists(log: list[dict[str, Any]], plural: str) -> int:
    return sum(1 for e in log if e["method"] == "GET" and e["path"].endswith(f"/{plural}"))


LEDGER = ledgerstore.shard_name(INSTANCE, 0)


def recorded(api: KubeAPI) -> str | None:
    """The first ledger shard's record of runtimes (None: no such key)."""
    found = api.get("ConfigMap", LEDGER, NS)
    assert found is not None, "no ledger"
    value: str | None = (found.get("data") or {}).get(ledgerstore.RUNTIMES_KEY)
    return value


def sync_args(api: KubeAPI, repo: Path, *extra: str) -> list[str]:
    return [
        "sync",
        "--repo",
        str(repo),
        "--kubeconfig",
        str(api.kubeconfig),
        "--namespace",
        NS,
        "--instance",
        INSTANCE,
        "--no-notes",
        *extra,
    ]


def first_shard(book: Ledger, *, instance: str, namespace: str) -> KubeObject:
    """The first shard `book` is written as (all of a ledger that fits in one)."""
    return ledgerstore.to_config_maps(book, instance=instance, namespace=namespace)[0]


def read_shard(obj: Mapping[str, Any] | None) -> Ledger:
    """The ledger held by one shard; None (no ConfigMap) holds the empty ledger."""
    return ledgerstore.from_config_maps([obj] if obj is not None else [])


ROW = {
    "namespace": NS,
    "name": "once",
    "spec_hash": "h",
    "state": "Succeeded",
    "finished_at": "2026-01-01T00:00:00+00:00",
}


def canary(real: Any, name: str) -> None:
    """A plain batch Job with the same TTL, finished now; returns once the real TTL
    controller has deleted it: whatever finished before it and carried the TTL is gone."""
    container = {"name": "c", "image": "busybox", "command": ["true"]}
    real.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "ttlSecondsAfterFinished": 1,
                "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
            },
        },
        NS,
    )
    real.run_job_controller(NS)
    real.kubelet(job=name, namespace=NS, phase="Succeeded")
    wait_for(f"for the TTL controller to delete {name}", lambda: real.get("Job", name, NS) is None)


def files(*docs: dict[str, Any]) -> dict[str, str]:
    return {f"jobs/{d['metadata']['name']}.yaml": yaml.safe_dump(d) for d in docs}


def git_config(remote: GitRemote, api: KubeAPI, tmp_path: Path, **overrides: Any) -> SyncConfig:
    return config_for(
        remote.url, tmp_path / "cache", api, namespace=NS, instance=INSTANCE, **overrides
    )
