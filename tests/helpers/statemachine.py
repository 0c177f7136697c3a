"""The world `tests/e2e/test_statemachine.py` drives: a Git remote of manifests, the API
double with its job controller and kubelet, and the real sync, with a clock a step can
move and faults a step can inject (a pod evicted or garbage-collected, the ledger lost
or restored from an old copy, a sync cut off after some of its writes).

Nothing here decides what is right; the state machine's invariants do. One world per
Hypothesis example: its own double, remote and cache, under a directory of its own.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.commands import status as commands
from mxgitops.commands.sync import SyncOutcome, sync
from mxgitops.errors import ClusterError
from mxgitops.kube import calls, cluster
from mxgitops.model import ON_CHANGE_ANNOTATION
from mxgitops.objects import (
    INSTANCE_LABEL,
    JOB_NAME_LABEL,
    MANAGED_BY_LABEL,
    Write,
    WriteResult,
)
from mxgitops.outputs import report
from mxgitops.outputs.summary import JobSummary, Summary
from mxgitops.planning import plan
from mxgitops.settings.config import SyncConfig
from mxgitops.state.ledgerstore import is_shard
from tests.gitrepos.fixtures import GitRemote, new_git_remote
from tests.helpers.sync import mxjob
from tests.kubeapi.harness import KubeAPI
from tests.kubeapi.resources import resource

NS = "ml"
INSTANCE = "sm"
JOB = "a"  # the job the machine changes
KEEP = "keep"  # a job nobody changes: the tree is never empty, and it must never be touched
RETRY = calls.RetryPolicy(attempts=3, base_delay=0.01, max_delay=2)
SPEC_HASH = "mxgitops.io/spec-hash"
RUNTIME_ID = "runtime_id"
# Consecutive runs of one spec that disruptions may cost: the operator's bound where the
# product has one, else this many, which nothing should need.
DISRUPTION_RUNS = 2
HAS_BOUND = "max_disruption_runs" in {f.name for f in fields(SyncConfig)}
BOUND = {"max_disruption_runs": DISRUPTION_RUNS} if HAS_BOUND else {}
PODS, CONFIGMAPS = resource("pods"), resource("configmaps")


@dataclass(frozen=True)
class Spec:
    """One manifest of the job the machine commits: what a user would change."""

    lr: str
    restart: str = "OnFailure"
    on_change: str = "replace"
    ttl: int | None = None
    dist: bool = False
    backoff: int | None = None  # runPolicy.backoffLimit: restarts across the whole job

    def doc(self, name: str = JOB) -> dict[str, Any]:
        run_policy: dict[str, int] = {}
        if self.ttl is not None:
            run_policy["ttlSecondsAfterFinished"] = self.ttl
        if self.backoff is not None:
            run_policy["backoffLimit"] = self.backoff
        policy = {"runPolicy": run_policy} if run_policy else {}
        return mxjob(
            name,
            servers=1 if self.dist else 0,
            workers=1,
            restart=self.restart,
            args=["train.py", f"--lr={self.lr}"],
            annotations={ON_CHANGE_ANNOTATION: self.on_change},
            **policy,
        )

    def text(self) -> str:
        return yaml.safe_dump(self.doc(), sort_keys=False)


# A manifest sync must refuse: the container is not named `mxnet`.
INVALID = yaml.safe_dump(
    {
        **mxjob(JOB, servers=0),
        "spec": {
            "mxReplicaSpecs": {
                "Worker": {"replicas": 1, "template": {"spec": {"containers": [{"image": "x"}]}}}
            }
        },
    }
)


def _disruption(reason: str, message: str) -> dict[str, str]:
    return {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message}


_LOW = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. "
# How a pod is taken away: its DisruptionTarget condition (None: a pod its node failed,
# which Kubernetes records as no disruption) and its status message.
EVICTIONS: dict[str, tuple[dict[str, str] | None, str]] = {
    "drain": (_disruption("EvictionByEvictionAPI", "Eviction API: evicting"), ""),
    "preempted": (_disruption("PreemptionByScheduler", "default-scheduler: preempting"), ""),
    "node pressure": (_disruption("TerminationByKubelet", _LOW), _LOW),
    # The kubelet says the pod used more than it requested: the job's own doing.
    "own use": (
        _disruption("TerminationByKubelet", _LOW),
        _LOW + "Container mxnet was using 3Gi, request is 1Gi, has larger consumption of memory. ",
    ),
    "node failed it": (None, "Pod was rejected: the node is out of memory"),
}
DISRUPTIONS = ("drain", "preempted", "node pressure")  # the others are the job's failure


class _ShiftedClock(datetime):
    """The planner's clock, `offset` ahead of the machine's: a step makes time pass."""

    offset = timedelta()

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> _ShiftedClock:
        return super().now(tz) + cls.offset


@contextmanager
def shifted_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_ShiftedClock]]:
    monkeypatch.setattr(plan, "datetime", _ShiftedClock)
    _ShiftedClock.offset = timedelta()
    try:
        yield _ShiftedClock
    finally:
        _ShiftedClock.offset = timedelta()


class CutCluster(cluster.Cluster):
    """Stops the sync (as a SIGTERM would) once `budget` of apply's writes were sent."""

    budget: int  # set after construction: not a dataclass field

    def _write_one(self, write: Write) -> WriteResult:
        if self.budget <= 0:
            self.stop()
            return WriteResult(write, ClusterError("cut off by the test"))
        self.budget -= 1
        return super()._write_one(write)


@dataclass
class World:
    root: Path
    api: KubeAPI = field(init=False)
    remote: GitRemote = field(init=False)
    sleeps: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.api = KubeAPI(self.root / "kubeconfig")
        keep = yaml.safe_dump(mxjob(KEEP, servers=0, args=["keep.py"]), sort_keys=False)
        self.remote = new_git_remote(self.root, files={f"jobs/{KEEP}.yaml": keep})

    def close(self) -> None:
        self.api.stop()
        shutil.rmtree(self.root, ignore_errors=True)  # a long run makes thousands

    # -- Git --------------------------------------------------------------------------

    def commit(self, text: str | None, message: str) -> str:
        path = self.remote.work / "jobs" / f"{JOB}.yaml"
        if text is None and not path.exists():
            return self.remote.commit({}, message)
        return self.remote.commit({f"jobs/{JOB}.yaml": text}, message)

    # -- syncs ------------------------------------------------------------------------

    def config(self, **overrides: Any) -> SyncConfig:
        values: dict[str, Any] = {
            "repo": self.remote.url,
            "path": "jobs",
            "namespace": NS,
            "instance": INSTANCE,
            "cache_dir": self.root / "cache",
            "kubeconfig": self.api.kubeconfig,
            "parallelism": 1,  # a cut sync stops after the same writes every time
            "events": False,
            **BOUND,
            **overrides,
        }
        return SyncConfig(**values)

    def sync(self, cut_after: int | None = None, **overrides: Any) -> SyncOutcome:
        plain = functools.partial(cluster.connect, retry=RETRY, sleep=self.sleeps.append)

        def connect(**kwargs: Any) -> cluster.Cluster:
            made = plain(**kwargs)
            if cut_after is None:
                return made
            fields = ("api_client", "parallelism", "retry", "sleep", "server")
            cut = CutCluster(**{f: getattr(made, f) for f in fields})
            cut.budget = cut_after
            return cut

        explicit = frozenset({"namespace", "instance", "parallelism", "events", *overrides})
        return sync(self.config(**overrides), explicit=explicit, connect=connect)

    def note(self, sha: str) -> Summary | None:
        text = self.remote.note(sha)
        return None if text is None else report.parse_note(text)

    def status(self, sha: str) -> Summary | None:
        """What `mxgitops status` shows for `sha`."""
        summary, _, _ = commands.read_status(self.config(cache_dir=self.root / "status"), sha)
        return summary

    # -- the cluster ----------------------------------------------------------------

    def ours(self, plural: str) -> list[dict[str, Any]]:
        return [
            o
            for o in self.api.objects(plural, NS)
            if (o["metadata"].get("labels") or {}).get(INSTANCE_LABEL) == INSTANCE
        ]

    def managed(self, plural: str) -> list[dict[str, Any]]:
        """Every object labelled as managed by mxgitops, whatever its instance."""
        return [
            o
            for o in self.api.objects(plural, NS)
            if (o["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) == "mxgitops"
        ]

    def batch_jobs(self, job: str = JOB) -> list[dict[str, Any]]:
        return [o for o in self.ours("jobs") if o["metadata"]["labels"].get(JOB_NAME_LABEL) == job]

    def runtimes(self, job: str = JOB) -> dict[str, str]:
        """The live runtime ids of `job`, each with its spec hash."""
        return {
            o["metadata"]["labels"][RUNTIME_ID]: o["metadata"]["annotations"][SPEC_HASH]
            for o in self.batch_jobs(job)
        }

    def pods(self, batch: str) -> list[dict[str, Any]]:
        return [
            p
            for p in self.api.objects("pods", NS)
            if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == batch
        ]

    def controllers(self) -> None:
        """Minutes pass between syncs: the job controller makes the pods, they start."""
        self.api.run_job_controller(NS)
        for pod in self.api.objects("pods", NS):
            if (pod.get("status") or {}).get("phase", "Pending") == "Pending":
                self.api.kubelet(pod["metadata"]["name"], namespace=NS, phase="Running")

    def finish_pods(self, batch: str, phase: str, **how: Any) -> int:
        """Every unfinished pod of the batch Job `batch` goes to `phase`; how many."""
        return len(self.api.kubelet(job=batch, namespace=NS, phase=phase, **how))

    def evict(self, pod_name: str, how: str) -> None:
        """The pod is taken away, whatever its restart policy (`EVICTIONS[how]`)."""
        condition, message = EVICTIONS[how]
        self.api.evict(pod_name, NS, message=message, condition=condition)

    def delete_pod(self, pod_name: str) -> None:
        """The pod garbage collector (or a clean-up script) deleted the pod."""
        store = self.api.server.store
        with store.lock:
            self.api.server.rest.delete(PODS, NS, pod_name, {})

    def advance(self, clock: type[_ShiftedClock], seconds: int) -> None:
        clock.offset += timedelta(seconds=seconds)
        self.api.advance_clock(seconds)

    # -- the ledger -----------------------------------------------------------------

    def ledger_maps(self) -> list[dict[str, Any]]:
        return [
            o
            for o in self.api.objects("configmaps", NS)
            if is_shard(o["metadata"]["name"], INSTANCE)
        ]

    def lose_ledger(self) -> None:
        for shard in self.ledger_maps():
            self.api.server.rest.delete(CONFIGMAPS, NS, shard["metadata"]["name"], {})

    def restore_ledger(self, copies: list[dict[str, Any]]) -> None:
        """The ledger as an old backup had it."""
        self.lose_ledger()
        for shard in copies:
            meta = {
                k: v
                for k, v in shard["metadata"].items()
                if k in ("name", "namespace", "labels", "annotations")
            }
            self.api.create({**shard, "metadata": meta}, NS)


def summary_row(summary: Summary, name: str = JOB) -> JobSummary | None:
    return next((j for j in summary.jobs if j.name == name), None)
