"""Kubernetes Events (events.k8s.io/v1) that say what a sync did to each job, and why.

`kubectl events --for job/<name> -n <namespace>` shows them: each Event regards the
job by its manifest's name (kind Job, as `kubectl` resolves `job/<name>`) and relates
to the first object its action wrote. One Event per job action: created, replaced,
updated in place, repaired, pruned, cleaned, stopped, held (with the reason), not
written (the API's message), and a job seen succeeded or failed for the first time
(the ledger's record of it). Unchanged jobs get none, so a sync that changes nothing
writes nothing.

An Event's name is a digest of what it says: a sync that says it again (a hold that
lasts, a write that fails again) creates an Event that exists already, which the
cluster counts as done without a read: mxgitops may create Events, nothing more.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from mxgitops import cluster as kube
from mxgitops import policy
from mxgitops.errors import OutputError
from mxgitops.objects import Create, KubeObject, ownership_labels
from mxgitops.runtime.failure import Failure
from mxgitops.summary import JobSummary, Summary

REPORTING_CONTROLLER = "mxgitops.io/sync"
MAX_NOTE = 1024  # bytes the API server allows an Event's note
# Action of a job row -> (the Event's reason, its action).
_REASONS = {
    "create": ("Created", "Create"),
    "replace": ("Replaced", "Replace"),
    "update": ("Updated", "Update"),
    "repair": ("Repaired", "Repair"),
    "delete": ("Pruned", "Delete"),
    "clean": ("Cleaned", "Delete"),
    "stop": ("Stopped", "Delete"),
    "hold": ("Held", "Hold"),
}


def for_summary(
    summary: Summary, finished: Iterable[tuple[str, str]], *, now: datetime | None = None
) -> list[KubeObject]:
    """The Events of one sync: its jobs' actions, and the jobs first seen finished."""
    moment = _micro_time(now or datetime.now(UTC))
    newly = set(finished)
    made = []
    for job in summary.jobs:
        if job.action == "hold" and policy.forbids_namespace(job.reason):
            continue  # the summary and the log say it; its namespace is not the sync's to write
        if job.errors:
            action = job.action.title()
            made.append(_event(summary, job, "WriteFailed", action, _errors(job), moment, True))
        elif job.action in _REASONS:
            reason, action = _REASONS[job.action]
            warning = job.action == "hold" and job.state != "Waiting"
            made.append(_event(summary, job, reason, action, job.reason, moment, warning))
        if (job.namespace, job.name) in newly and job.state in ("Succeeded", "Failed"):
            made.append(
                _event(
                    summary, job, job.state, "Finish", _ending(job), moment, job.state == "Failed"
                )
            )
    return made


def write(cluster: kube.Cluster, events: Sequence[KubeObject]) -> int:
    """Create the Events; raise an OutputError naming the first that was refused."""
    if not events:
        return 0
    results = cluster.write([Create(e) for e in events])
    failed = [r for r in results if r.error is not None]
    if failed:
        raise OutputError(f"{len(failed)} of {len(events)} Events not written: {failed[0].error}")
    return len(events)


def _event(
    summary: Summary,
    job: JobSummary,
    reason: str,
    action: str,
    note: str,
    moment: str,
    warning: bool = False,
) -> KubeObject:
    said = "\n".join((job.namespace, job.name, reason, note, job.spec_hash, job.runtime_id))
    digest = hashlib.sha256(said.encode()).hexdigest()[:16]
    event: KubeObject = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": f"{job.name}.{digest}",
            "namespace": job.namespace,
            "labels": ownership_labels(summary.instance),
        },
        "eventTime": moment,
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": f"mxgitops-{summary.instance}",
        "action": action,
        "reason": reason,
        "type": "Warning" if warning else "Normal",
        "note": _fit(note),
        "regarding": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "namespace": job.namespace,
            "name": job.name,
        },
    }
    related = _first_object(job)
    if related is not None:
        event["related"] = related
    return event


def _errors(job: JobSummary) -> str:
    return f"{job.action} failed: " + "; ".join(job.errors)


def _ending(job: JobSummary) -> str:
    where = f" on cluster {job.placement}" if job.placement else ""
    if job.state == "Failed" and job.failure:
        return f"failed{where}: " + Failure.from_mapping(job.failure).describe()
    return f"{job.state.lower()}{where} (runtime {job.runtime_id or '-'})"


def _first_object(job: JobSummary) -> dict[str, str] | None:
    """The first object the action wrote (`+job/name`, `-service/name`), as a reference."""
    kinds = {"job": ("batch/v1", "Job"), "service": ("v1", "Service")}
    for written in job.objects:
        kind, _, name = written[1:].partition("/")
        if kind in kinds and name:
            version, kind_name = kinds[kind]
            return {
                "apiVersion": version,
                "kind": kind_name,
                "namespace": job.namespace,
                "name": name,
            }
    return None


def _fit(note: str) -> str:
    data = note.encode()
    if len(data) <= MAX_NOTE:
        return note
    return data[: MAX_NOTE - 3].decode("utf-8", "ignore") + "…"


def _micro_time(moment: datetime) -> str:
    """A MicroTime, as the API server wants `eventTime`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
