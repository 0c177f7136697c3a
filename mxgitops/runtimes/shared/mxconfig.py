"""How a distributed MXNet process learns its place in the cluster, and reaches its peers.

ps-lite reads `DMLC_*` variables (where the scheduler is, how many servers and
workers, which role this process plays; BytePS also `DMLC_WORKER_ID`, the
worker's index). Kubeflow's MXNet images additionally read `MX_CONFIG`, a JSON
document listing every role's addresses and this process's task;
`DMLC_USE_KUBERNETES=1` tells them they run on Kubernetes. Every container of
the pod gets them, as the training operator gave them (a launcher or a
monitoring sidecar reads them too). Rendered deterministically (compact JSON,
sorted keys): the same job always yields byte-identical pod templates.

Every address written resolves to its replica's pod. Each pod's `hostname` is
its batch Job's name; in a dist job its `subdomain` is the job's one headless
Service (named as the scheduler's batch Job, selecting every pod of the job),
so `{hostname}.{service}` is that pod's DNS name in the namespace. A local job
has no Service: its one process reads its own hostname, which its pod's
/etc/hosts resolves. No service IP is taken by any job.

MX_CONFIG lists every server's and worker's address only in jobs of at most
`MAX_LISTED_REPLICAS` replicas. Each of a job's N processes carrying N
addresses makes its objects grow as N² (a 5,000-worker job: over a GiB and
minutes to render, more than the CronJob's memory); a larger job's MX_CONFIG
names the scheduler alone, the one address ps-lite dials, and a process finds
the counts in `DMLC_NUM_SERVER` and `DMLC_NUM_WORKER`. Rendering is linear.

A local job gets what the operator gave one: its own address in MX_CONFIG,
`DMLC_ROLE=worker`, one worker, no server, and an empty scheduler address.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mxgitops.model import (
    JobMode,
    MxJob,
    ReplicaSpec,
    ReplicaType,
    job_object_name,
    scheduler_service_name,
)

# 128 addresses are about 9 KB in each process's environment: the whole
# listing of a job stays under 1.2 MB (128² = 16,384 addresses) to render.
MAX_LISTED_REPLICAS = 128
# A pod template annotation the operator copied into MX_CONFIG's labels (TVM tuning).
TUNER_SERVER_KEY = "tuner-server-key"


@dataclass(frozen=True)
class Address:
    url: str
    port: int


@dataclass(frozen=True)
class MxConfig:
    """The `MX_CONFIG` document of one task (Kubeflow's format).

    `cluster` maps a role (scheduler, server, worker) to the addresses of its
    replicas in index order; `labels` maps each role to its (empty) label;
    `task_type`/`task_index` name this process.
    """

    cluster: Mapping[str, tuple[Address, ...]]
    labels: Mapping[str, str]
    task_type: str
    task_index: int

    @classmethod
    def for_task(cls, job: MxJob, replica_type: ReplicaType, index: int) -> MxConfig:
        """The config of replica `index` of `replica_type` in `job`: every address is
        its replica's pod's DNS name (`address`). Jobs larger than
        `MAX_LISTED_REPLICAS` list the scheduler only."""
        listed = sum(r.replicas for r in job.replica_specs) <= MAX_LISTED_REPLICAS
        cluster: dict[str, tuple[Address, ...]] = {}
        for replica in job.replica_specs:
            if replica.type is ReplicaType.SCHEDULER or listed:
                cluster[replica.type.role] = tuple(
                    Address(address(job, replica.type, i), replica.ps_root_port)
                    for i in range(replica.replicas)
                )
        return cls(
            cluster=cluster,
            labels={replica.type.role: _tuner_key(replica) for replica in job.replica_specs},
            task_type=replica_type.role,
            task_index=index,
        )

    @property
    def task(self) -> dict[str, Any]:
        """The seed's `MxConfig.Task`: this process's type and index."""
        return {"type": self.task_type, "index": self.task_index}

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": {
                role: [{"url": a.url, "port": a.port} for a in addresses]
                for role, addresses in self.cluster.items()
            },
            "labels": dict(self.labels),
            "task": self.task,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))


def hostname(job: MxJob, replica_type: ReplicaType, index: int) -> str:
    """A replica's pod's hostname: its batch Job's name (a DNS label of at most 63)."""
    return job_object_name(job, replica_type, index)


def service_name(job: MxJob) -> str | None:
    """The job's headless Service, every pod's subdomain; a local job has none."""
    return scheduler_service_name(job) if job.mode is JobMode.DIST else None


def address(job: MxJob, replica_type: ReplicaType, index: int) -> str:
    """The name that resolves to one replica's pod, from any pod of the job."""
    host = hostname(job, replica_type, index)
    service = service_name(job)
    return f"{host}.{service}" if service else host


def _tuner_key(replica: ReplicaSpec) -> str:
    """MX_CONFIG's label of a role: the template's `tuner-server-key`, as the operator."""
    annotations = (replica.template.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(TUNER_SERVER_KEY, "") if isinstance(annotations, Mapping) else ""
    return value if isinstance(value, str) else ""


def dmlc_env(job: MxJob, replica_type: ReplicaType, index: int) -> list[dict[str, str]]:
    """The env entries every container of one replica gets."""
    return dmlc_envs(job)(replica_type, index)


def dmlc_envs(job: MxJob) -> Callable[[ReplicaType, int], list[dict[str, str]]]:
    """`dmlc_env` of each replica of `job`: what its replicas share (the counts, the
    scheduler's address, MX_CONFIG's cluster and labels) worked out and encoded once,
    not once per replica, the same entries byte for byte."""
    shared, head = dmlc_shared(job, lambda replica_type, i: address(job, replica_type, i))

    def env(replica_type: ReplicaType, index: int) -> list[dict[str, str]]:
        values = dmlc_values(shared, head, replica_type, str(index))
        if replica_type is ReplicaType.WORKER:  # BytePS reads the worker's index here
            values["DMLC_WORKER_ID"] = str(index)
        return [{"name": name, "value": value} for name, value in values.items()]

    return env


def dmlc_shared(
    job: MxJob, address_of: Callable[[ReplicaType, int], str], *, tuner_labels: bool = True
) -> tuple[dict[str, str], str]:
    """What every replica of `job` shares, on any runtime: the DMLC variables, and
    MX_CONFIG's text up to its task (`dmlc_values` ends it), each replica's address
    `address_of(type, index)`. MX_CONFIG's keys sorted: "cluster" and "labels" (the
    job's), then "task" (the replica's); its labels are the templates' tuner keys
    (`tuner_labels`), else empty."""
    scheduler = job.replica(ReplicaType.SCHEDULER)
    servers = job.replica(ReplicaType.SERVER)
    workers = job.replica(ReplicaType.WORKER)
    shared = {
        # A local job has no scheduler: the operator wrote an empty address and port 0.
        "DMLC_PS_ROOT_URI": address_of(ReplicaType.SCHEDULER, 0) if scheduler else "",
        "DMLC_PS_ROOT_PORT": str(scheduler.ps_root_port if scheduler else 0),
        "DMLC_NUM_SERVER": str(servers.replicas if servers else 0),
        "DMLC_NUM_WORKER": str(workers.replicas if workers else 0),
    }
    listed = sum(r.replicas for r in job.replica_specs) <= MAX_LISTED_REPLICAS
    cluster = {
        replica.type.role: [
            {"port": replica.ps_root_port, "url": address_of(replica.type, i)}
            for i in range(replica.replicas)
        ]
        for replica in job.replica_specs
        if replica.type is ReplicaType.SCHEDULER or listed
    }
    labels = {r.type.role: _tuner_key(r) if tuner_labels else "" for r in job.replica_specs}
    config = {"cluster": cluster, "labels": labels}
    return shared, json.dumps(config, sort_keys=True, separators=(",", ":"))[:-1] + ',"task":'


def dmlc_values(
    shared: Mapping[str, str], head: str, replica_type: ReplicaType, index: str
) -> dict[str, str]:
    """One replica's DMLC variables and MX_CONFIG (`dmlc_shared`'s), its task `index` as
    written (a number, or a `$(VAR)` the kubelet expands)."""
    role = replica_type.role
    # The task as json.dumps writes it (sorted, compact), spelled out: a role is a
    # plain word, and a json.dumps per replica costs more than the rest of its environment.
    task = f'{{"index":{index},"type":"{role}"}}'
    return {**shared, "DMLC_ROLE": role, "DMLC_USE_KUBERNETES": "1", "MX_CONFIG": head + task + "}"}
