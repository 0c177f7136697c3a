"""install's first sync: started at once as a Job from the CronJob (as the receiver and
`kubectl create job --from=cronjob/...` start one), waited for within a deadline, and
ended with the sync's own exit code, read from its pod."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from mxgitops.errors import ClusterError
from mxgitops.install.overlay import CRONJOB
from mxgitops.kube.cluster import Cluster
from mxgitops.objects import KubeObject
from mxgitops.receiver.manualjob import PUSH_ANNOTATION, finished, job_from_cronjob

STARTED_BY = "mxgitops.io/install"  # the annotation on the Job install started
POLL = 2.0  # seconds between two reads of the Job
LOG_LINES = 20  # of a failed first sync's log, shown
LOG_BYTES = 16 << 10
LINE_SHOWN = 300  # characters of each of its lines


@dataclass(frozen=True)
class FirstSync:
    job: str
    exit_code: int | None  # None: still running at the deadline, or no pod to tell
    reason: str  # the Job's end in words
    log: tuple[str, ...] = ()  # a failed sync's last lines, each bounded and printable


def first_sync_name(cronjob: KubeObject) -> str:
    """`<cronjob>-install-<digest>`: one name per state of the CronJob, so that an
    install run again after a failure waits for the same Job instead of starting two."""
    metadata = cronjob["metadata"]
    digest = hashlib.sha256(f"{metadata['uid']}/{metadata['resourceVersion']}".encode())
    return f"{CRONJOB}-install-{digest.hexdigest()[:10]}"


def start(cluster: Cluster, namespace: str) -> str:
    """Start the CronJob's sync now; the Job's name."""
    cronjob = cluster.cronjob(namespace, CRONJOB)
    name = first_sync_name(cronjob)
    job = job_from_cronjob(cronjob, name, push="")
    annotations = job["metadata"]["annotations"]
    del annotations[PUSH_ANNOTATION]
    annotations[STARTED_BY] = "first sync"
    cluster.create_object(job)
    return name


def wait(
    cluster: Cluster,
    namespace: str,
    name: str,
    *,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> FirstSync:
    """Wait for the Job to end (or `timeout` seconds); its pod's exit code."""
    deadline = clock() + timeout
    probe: KubeObject = {"kind": "Job", "metadata": {"namespace": namespace, "name": name}}
    while True:
        job = cluster.read_object(probe)
        if job is None:
            raise ClusterError(f"the first sync's Job {namespace}/{name} is gone")
        if finished(job):
            break
        if clock() >= deadline:
            return FirstSync(name, None, f"still running after {timeout:g} s")
        sleep(POLL)
    pods = cluster.labelled("Pod", f"job-name={name}", namespace)
    code = _exit_code(pods)
    conditions = (job.get("status") or {}).get("conditions") or []
    ended = [c for c in conditions if c.get("status") == "True"]
    reason = str(ended[-1].get("type")) if ended else "ended"
    log = _log_tail(cluster, namespace, pods) if code != 0 else ()
    return FirstSync(name, code, reason, log)


def _exit_code(pods: list[KubeObject]) -> int | None:
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (status.get("state") or {}).get("terminated") or {}
            code = terminated.get("exitCode")
            if isinstance(code, int):
                return code
    return None


def _log_tail(cluster: Cluster, namespace: str, pods: list[KubeObject]) -> tuple[str, ...]:
    """The sync's last lines (what went wrong, in its words), each on one printable line
    of at most LINE_SHOWN characters; none if the log cannot be read."""
    for pod in pods:
        try:
            text = cluster.pod_log(
                namespace,
                pod["metadata"]["name"],
                container=CRONJOB,
                tail_lines=LOG_LINES,
                limit_bytes=LOG_BYTES,
            )
        except ClusterError:
            return ()
        return tuple(
            "".join(c if c.isprintable() else "?" for c in line)[:LINE_SHOWN]
            for line in text.splitlines()[-LOG_LINES:]
        )
    return ()
