"""Read each job's state back from its live JobSet (`LiveJobSet`; `grouping.py` says
which job each object belongs to).

The JobSet runtime's one object per job is its JobSet, named `{job}-{runtimeId}`; its
pods (labelled by the JobSet controller with `jobset.sigs.k8s.io/jobset-name`) say
what each replica did, and a queued job's Kueue Workload (owned by its JobSet) says
why it waits or why it stopped.

States, from the JobSet's conditions first: `Completed` → Succeeded, `Failed` →
Failed (with the failed replica's exit code and reason from its pod); suspended and
queued → Suspended while held out of its queue or its Workload is deactivated
(`runPolicy.suspend`), else Queued with Kueue's reason (`couldn't assign flavors to pod
set worker: insufficient quota for nvidia.com/gpu ...`), or Preempted / Evicted when
Kueue stopped it (it runs again once readmitted); suspended and not queued → Suspended;
otherwise
Running, or Pending while none of its pods runs yet. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from mxgitops import objects
from mxgitops.model import (
    ON_CHANGE_ANNOTATION,
    MxJob,
    OnChange,
    ReplicaType,
)
from mxgitops.objects import KubeObject, ObjectRef
from mxgitops.runtimes.jobset.failure import COMPLETION_INDEX_LABEL, JOBSET_NAME_LABEL, failure_of
from mxgitops.runtimes.jobset.inplace import compare
from mxgitops.runtimes.jobset.placement import (
    admission_wait,
    cluster_of,
    failed_role,
    mirrored_replicas,
    no_log_here,
    unreachable,
)
from mxgitops.runtimes.jobset.render import HOLD_LABEL
from mxgitops.runtimes.jobset.stopped import (
    current_run,
    disruption_restarts,
    stopped_after_finishing,
)
from mxgitops.runtimes.shared import scheduling
from mxgitops.runtimes.shared.base import Stray
from mxgitops.runtimes.shared.disruption import Disruption
from mxgitops.runtimes.shared.failure import MAX_MESSAGE, Failure
from mxgitops.runtimes.shared.inplace import InPlace
from mxgitops.runtimes.shared.labels import (
    JOB_TYPE_LABEL,
    REPLICA_TYPES,
    REPLICAS_ANNOTATION,
    RUNTIME_ID_LABEL,
    parse_replicas_annotation,
)
from mxgitops.runtimes.shared.pods import newest_pod, pending_reason, pod_replica_state
from mxgitops.runtimes.shared.reruns import recorded
from mxgitops.runtimes.shared.state import MxReplicaStatus, ReplicaState, State, aggregate


@dataclass(frozen=True)
class LiveJobSet:
    """The live JobSets (one, or two while a replace is under way) of one job, their pods
    and Kueue's Workloads for them; the same reading interface as `batch.LiveJob`
    (`runtime/base.py`'s `Live`)."""

    namespace: str
    name: str
    jobsets: tuple[KubeObject, ...] = ()
    pods: tuple[KubeObject, ...] = ()
    workloads: tuple[KubeObject, ...] = ()
    strays: tuple[Stray, ...] = ()
    clusters: tuple[KubeObject, ...] = ()  # Kueue's MultiKueueClusters, where listed

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def has_objects(self) -> bool:
        return bool(self.jobsets)

    @cached_property
    def spec_hash(self) -> str | None:
        return _agreed(
            objects.annotations_of(o).get(objects.SPEC_HASH_ANNOTATION) for o in self.jobsets
        )

    @cached_property
    def runtime_id(self) -> str | None:
        return _agreed(objects.labels_of(o).get(RUNTIME_ID_LABEL) for o in self.jobsets)

    @cached_property
    def source(self) -> str | None:
        return _agreed(
            objects.annotations_of(o).get(objects.SOURCE_ANNOTATION) for o in self.jobsets
        )

    @cached_property
    def commit(self) -> str | None:
        """The commit that submitted the JobSets (their commit annotation), if all agree."""
        return _agreed(
            objects.annotations_of(o).get(objects.COMMIT_ANNOTATION) for o in self.jobsets
        )

    @cached_property
    def created(self) -> str:
        return objects.first_created(self.jobsets)

    def refs(self) -> list[ObjectRef]:
        """What deleting the job deletes: its JobSets (their Jobs and pods follow)."""
        return sorted(ObjectRef.of(o) for o in self.jobsets)

    def has(self, ref: ObjectRef) -> bool:
        return ref in self.refs()

    def refs_of(self, spec_hash: str) -> list[ObjectRef]:
        return sorted(
            ObjectRef.of(o)
            for o in self.jobsets
            if objects.annotations_of(o).get(objects.SPEC_HASH_ANNOTATION) == spec_hash
        )

    def incomplete(self) -> str | None:
        if not self.jobsets:
            return "no JobSet is left"
        if self.runtime_id is None:
            return "its JobSets are of several runtimes (a replace was interrupted)"
        return None

    def unfinished_job_refs(self) -> list[ObjectRef]:
        """JobSets without a Completed or Failed condition."""
        return sorted(ObjectRef.of(o) for o in self.jobsets if _finished(o) is None)

    def finished_replicas(self) -> list[ObjectRef]:
        """Its JobSets, once suspended (by Kueue, or by hand) while a replica of the judged
        one had finished: its child Job complete, or a pod of it succeeded (an Indexed
        Job keeps its completed indexes). JobSet resumes only its active child Jobs, and
        those the Job controller runs only their indexes not completed: the job would
        wait for the finished replicas for ever. Made anew, it runs whole."""
        jobset = self._judged
        if jobset is None or not (jobset.get("spec") or {}).get("suspend"):
            return []
        if _finished(jobset) is not None:
            return []
        succeeded = any(
            (p.get("status") or {}).get("phase") == "Succeeded"
            for p in current_run(jobset, self.pods)
        )
        return self.refs() if succeeded or _succeeded_roles(jobset) else []

    def on_change(self) -> OnChange:
        values = {objects.annotations_of(o).get(ON_CHANGE_ANNOTATION) for o in self.jobsets}
        return OnChange.WAIT if OnChange.WAIT.value in values else OnChange.REPLACE

    def compare_in_place(self, job: MxJob) -> list[InPlace]:
        """The patches that bring its JobSets (and Workloads) to `job`'s manifest."""
        return compare(job, self.jobsets, self.workloads)

    # -- state ---------------------------------------------------------------------------

    @cached_property
    def _judged(self) -> KubeObject | None:
        """The JobSet whose state is the job's: the newest, if several."""
        if not self.jobsets:
            return None

        def key(obj: Mapping[str, Any]) -> tuple[str, str]:
            metadata = obj.get("metadata") or {}
            return (str(metadata.get("creationTimestamp") or ""), str(metadata.get("name") or ""))

        return max(self.jobsets, key=key)

    def status(self) -> tuple[State, list[MxReplicaStatus]]:
        state, replicas = self._status
        return state, list(replicas)

    def reason(self) -> str:
        """Why a queued, preempted or evicted job does not run: Kueue's words."""
        return self._status_reason[1]

    def queue(self) -> str:
        """The Kueue LocalQueue its JobSets name (their queue-name label), if all agree."""
        return _agreed(objects.labels_of(o).get(scheduling.QUEUE_LABEL) for o in self.jobsets) or ""

    def placement(self) -> str:
        """The cluster Kueue runs the job on, where it is another (MultiKueue's
        `status.clusterName` of its Workload, `placement.py`); "" where it runs here."""
        jobset = self._judged
        return cluster_of(self._workload_of(jobset)) if jobset is not None else ""

    def unreachable(self) -> str:
        """Why its state may be stale: the cluster it runs on does not answer the manager
        (`placement.unreachable`); "" while it does, or once the job finished."""
        cluster = self.placement()
        if not cluster or self._status[0] in (State.SUCCEEDED, State.FAILED):
            return ""
        return unreachable(cluster, self.clusters)

    @cached_property
    def _status(self) -> tuple[State, tuple[MxReplicaStatus, ...]]:
        jobset = self._judged
        if jobset is None:
            return State.PENDING, ()
        finished = _finished(jobset)
        waiting, reason = self._status_reason
        replicas = tuple(self._replicas(jobset, suspended=waiting is not None))
        if finished is not None:
            return finished, replicas
        if waiting is not None:
            return waiting, tuple(_with_reason(r, reason) for r in replicas)
        states = {r.state for r in replicas}
        if ReplicaState.RUNNING in states or ReplicaState.SUCCEEDED in states:
            return State.RUNNING, replicas
        return (State.PENDING if replicas else State.RUNNING), replicas

    @cached_property
    def _status_reason(self) -> tuple[State | None, str]:
        """Why the judged JobSet does not run, if it is suspended: (state, reason)."""
        jobset = self._judged
        if jobset is None or not (jobset.get("spec") or {}).get("suspend"):
            return None, ""
        labels = objects.labels_of(jobset)
        if not labels.get(scheduling.QUEUE_LABEL):
            return State.SUSPENDED, ""
        if HOLD_LABEL in labels:
            return State.SUSPENDED, "held out of its queue (runPolicy.suspend): queued once resumed"
        workload = self._workload_of(jobset)
        if workload is None:
            return State.QUEUED, "waiting for Kueue to make its Workload"
        if (workload.get("spec") or {}).get("active") is False:
            return State.SUSPENDED, "its Kueue Workload is deactivated (spec.active: false)"
        conditions = _conditions(workload)
        evicted = conditions.get("Evicted")
        if evicted is not None and evicted.get("status") == "True":
            preempted = evicted.get("reason") == "Preempted"
            message = _said(evicted.get("message") or evicted.get("reason"))
            return (State.PREEMPTED if preempted else State.EVICTED), message
        reserved = conditions.get("QuotaReserved") or {}
        message = _said(reserved.get("message") or reserved.get("reason") or "")
        if reserved.get("status") == "True":
            message = admission_wait(workload) or message
        namespace = str((jobset.get("metadata") or {}).get("namespace") or "")
        return State.QUEUED, _queue_missing(message, namespace) or message or (
            "waiting for Kueue to admit it"
        )

    def _workload_of(self, jobset: KubeObject) -> KubeObject | None:
        uid = (jobset.get("metadata") or {}).get("uid")
        for workload in self.workloads:
            for owner in (workload.get("metadata") or {}).get("ownerReferences") or []:
                if owner.get("kind") == "JobSet" and owner.get("uid") == uid:
                    return workload
        return None

    def _replicas(self, jobset: KubeObject, *, suspended: bool) -> list[MxReplicaStatus]:
        counts = _counts(jobset)
        name = (jobset.get("metadata") or {}).get("name")
        mine = [p for p in self.pods if objects.labels_of(p).get(JOBSET_NAME_LABEL) == name]
        if not mine and not suspended and self.placement():
            return mirrored_replicas(jobset, counts)  # its pods are on that cluster
        pods = _pods_by_replica(mine)
        done = _succeeded_roles(jobset)
        statuses = []
        for replica_type, count in counts.items():
            states, reasons = [], []
            for index in range(count):
                replica_pods = pods.get((replica_type, index), [])
                if replica_type.role in done:
                    state = ReplicaState.SUCCEEDED
                elif suspended:
                    state = ReplicaState.SUSPENDED
                elif not replica_pods:
                    state = ReplicaState.PENDING
                else:
                    state = pod_replica_state(newest_pod(replica_pods))
                    if state is ReplicaState.PENDING:
                        reasons.append(pending_reason(newest_pod(replica_pods)))
                states.append(state)
            statuses.append(
                aggregate(replica_type, count, states, next((r for r in reasons if r), ""))
            )
        return statuses

    def disruption(self) -> Disruption | None:
        """A queued dist gang that Kueue stopped after some of its replicas finished
        (`stopped.py`), which the planner runs again whole. Every other disruption the
        JobSet controller restarts whole itself (its failurePolicy, `render.py`),
        uncounted: None."""
        jobset = self._judged
        if jobset is None or _finished(jobset) is not None:
            return None
        if not objects.labels_of(jobset).get(scheduling.QUEUE_LABEL):
            return None  # not Kueue's to stop
        if self._status_reason[0] is State.SUSPENDED:
            return None  # suspended by its manifest: made anew by `finished_replicas`
        counts = _counts(jobset)
        if ReplicaType.SCHEDULER not in counts:
            return None  # a local job: its one worker finishing finishes the JobSet
        return stopped_after_finishing(jobset, self.pods)

    def disruptions(self) -> tuple[str, ...]:
        """The disruptions this spec met in a row, each run again since (`reruns.py`): as
        its JobSet records them, and its restarts for them (`stopped.py`)."""
        jobset = self._judged
        return () if jobset is None else recorded((jobset,)) + disruption_restarts(jobset)

    def training_pods(self) -> tuple[Mapping[str, Any] | None, tuple[KubeObject, ...]]:
        """Worker 0's newest pod and the pods of the judged JobSet (`Live`'s); none
        where it runs on another cluster (its pods are there)."""
        jobset = self._judged
        if jobset is None:
            return None, ()
        name = (jobset.get("metadata") or {}).get("name")
        run = tuple(p for p in self.pods if objects.labels_of(p).get(JOBSET_NAME_LABEL) == name)
        workers = _pods_by_replica(run).get((ReplicaType.WORKER, 0))
        return (newest_pod(workers) if workers else None), run

    def failure(self) -> Failure | None:
        """Why the judged JobSet failed: its failed replica's pod, and its condition."""
        jobset = self._judged
        if jobset is None or _finished(jobset) is not State.FAILED:
            return None
        condition = _conditions(jobset).get("Failed") or {}
        name = (jobset.get("metadata") or {}).get("name")
        mine = [p for p in self.pods if objects.labels_of(p).get(JOBSET_NAME_LABEL) == name]
        failure = failure_of(condition, mine)
        cluster = self.placement()
        if failure.pod or not cluster:
            return failure
        counts = _counts(jobset)
        return replace(failure, replica=failed_role(jobset, counts), log=no_log_here(cluster))


def _pods_by_replica(pods: Iterable[KubeObject]) -> dict[tuple[ReplicaType, int], list[KubeObject]]:
    found: dict[tuple[ReplicaType, int], list[KubeObject]] = {}
    for pod in pods:
        labels = objects.labels_of(pod)
        replica_type = REPLICA_TYPES.get(labels.get(JOB_TYPE_LABEL, ""))
        index = labels.get(COMPLETION_INDEX_LABEL, "")
        if replica_type is not None and index.isdigit():
            found.setdefault((replica_type, int(index)), []).append(pod)
    return found


def _counts(jobset: KubeObject) -> dict[ReplicaType, int]:
    """Each replica type's count, as the JobSet's replicas annotation records them."""
    return parse_replicas_annotation(objects.annotations_of(jobset).get(REPLICAS_ANNOTATION, ""))


def _succeeded_roles(jobset: Mapping[str, Any]) -> set[str]:
    return {
        str(s.get("name"))
        for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or []
        if int(s.get("succeeded") or 0) >= 1
    }


def _conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("type")): c for c in (obj.get("status") or {}).get("conditions") or []}


def _finished(jobset: Mapping[str, Any]) -> State | None:
    conditions = _conditions(jobset)
    if (conditions.get("Completed") or {}).get("status") == "True":
        return State.SUCCEEDED
    if (conditions.get("Failed") or {}).get("status") == "True":
        return State.FAILED
    return None


def _with_reason(status: MxReplicaStatus, reason: str) -> MxReplicaStatus:
    return MxReplicaStatus(status.type, status.state, status.replicas_states, reason)


_NO_LOCAL_QUEUE = re.compile(r"LocalQueue (?P<queue>\S+) doesn't exist")


def _queue_missing(message: str, namespace: str) -> str:
    """Kueue's word for a queue that is not there, said with where and what it means:
    the job waits for ever, and a Volcano queue's name (the operator's) is no LocalQueue."""
    missing = _NO_LOCAL_QUEUE.fullmatch(message)
    if missing is None:
        return ""
    return (
        f"the LocalQueue {missing['queue']} does not exist in namespace {namespace}: the job "
        "waits until it does (schedulingPolicy.queue names a Kueue LocalQueue, not a Volcano "
        "queue)"
    )


def _said(text: Any) -> str:
    return " ".join(str(text or "").split())[:MAX_MESSAGE]


def _agreed(values: Iterable[str | None]) -> str | None:
    distinct = set(values)
    if len(distinct) != 1:
        return None
    return distinct.pop()
