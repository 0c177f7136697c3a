"""Kubernetes Events (events.k8s.io/v1) that say what a sync did to each job, and why.

`kubectl events --for job/<name> -n <namespace>` shows them: each Event regards the
job by its manifest's name (kind Job, as `kubectl` resolves `job/<name>`) and relates
to the first object its action wrote. One Event per job action: created, replaced,
updated in place, repaired, pruned, cleaned, stopped, held (with the reason), not
written (the API's message), and a job seen succeeded or failed for the first time
(the ledger's record of it), with what its training record says (epochs, metrics,
duration, resource use). Unchanged jobs get none, so a sync that changes nothing
writes nothing: a run's progress alone is no Event (the note, the commit status and
the metrics say it).

An Event's name is a digest of what it says. A condition that lasts (a hold, a write
that fails again) is said by every sync that sees it, but written once: as the
recorder of Kubernetes' own controllers does (client-go's `tools/events`), the sync
reads the Event of that name first, and says it again only as a series update of it
(`series.count`, `series.lastObservedTime`, a PATCH) once `SERIES_INTERVAL` has passed
since it was last said; the update also keeps the Event from the API server's event
TTL while the condition lasts. So a sync that changes nothing writes nothing, however
long a job stays held. Where the Event cannot be read (a ClusterRole granting only
`create`), it is created, as the one said before, and the cluster refuses the copy.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any

from mxgitops.errors import ClusterError, ClusterForbidden, MxGitOpsError, OutputError
from mxgitops.kube import cluster as kube
from mxgitops.manifests import policy
from mxgitops.objects import (
    Create,
    KubeObject,
    ObjectRef,
    Patch,
    Write,
    ownership_labels,
    same_owner,
)
from mxgitops.outputs import recordtext
from mxgitops.outputs.leased import Leased
from mxgitops.outputs.summary import JobSummary, Summary
from mxgitops.runtimes.shared.failure import Failure

REPORTING_CONTROLLER = "mxgitops.io/sync"
MAX_NOTE = 1024  # bytes the API server allows an Event's note
# How often a lasting condition is said again, as a series update: client-go's event
# recorder refreshes its series as often (its `refreshTime`).
SERIES_INTERVAL = timedelta(minutes=30)
# The reasons of conditions that last from sync to sync (the others go with a write, or
# with a state seen for the first time).
LASTING = frozenset({"Held", "WriteFailed"})
_MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"
log = logging.getLogger("mxgitops")
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


def write(
    cluster: kube.Cluster,
    events: Sequence[KubeObject],
    *,
    now: datetime | None = None,
    leased: Leased = lambda _: nullcontext(),
) -> int:
    """Create the Events, a lasting condition's only if not said already, or update its
    series (`series_update`), the writes under `leased` (the sink's: the Lease); raise an
    OutputError naming the first that was refused. The number of Events written."""
    moment = now or datetime.now(UTC)
    writes: list[Write] = []
    failed: list[MxGitOpsError] = []
    readable = True
    for event in events:
        if event["reason"] not in LASTING or not readable:
            writes.append(Create(event))
            continue
        try:
            said = cluster.get(ObjectRef.of(event))
        except ClusterForbidden as exc:  # granted create only: the cluster refuses a copy
            log.warning("Events said before cannot be read, so are created again: %s", exc)
            readable = False
            writes.append(Create(event))
            continue
        except ClusterError as exc:
            failed.append(exc)
            continue
        if said is None:
            writes.append(Create(event))
        elif same_owner(said, event) and (update := series_update(said, moment)) is not None:
            writes.append(Patch(ObjectRef.of(event), update))
    results = []
    if writes:
        with leased("Events"):
            results = cluster.write(writes)
    failed += [r.error for r in results if r.error is not None]
    if failed:
        raise OutputError(f"{len(failed)} of {len(events)} Events not written: {failed[0]}")
    return len(writes)


def series_update(said: Mapping[str, Any], now: datetime) -> KubeObject | None:
    """The merge patch that says an Event again (its series counted one more, observed
    `now`), or None while it was said less than `SERIES_INTERVAL` ago."""
    found = said.get("series")
    series: Mapping[str, Any] = found if isinstance(found, dict) else {}
    last = _parsed(series.get("lastObservedTime")) or _parsed(said.get("eventTime"))
    if last is not None and timedelta(0) <= now - last < SERIES_INTERVAL:
        return None
    count = series.get("count")
    times = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1
    return {"series": {"count": times + 1, "lastObservedTime": _micro_time(now)}}


def _parsed(value: object) -> datetime | None:
    try:
        return datetime.strptime(str(value), _MICRO_TIME).replace(tzinfo=UTC)
    except ValueError:
        return None


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
    """How the run ended, and what its training record says of it (its epochs, metrics
    and use): said once, in the Event of the sync that first sees it finished."""
    where = f" on cluster {job.placement}" if job.placement else ""
    if job.state == "Failed" and job.failure:
        said = f"failed{where}: " + Failure.from_mapping(job.failure).describe()
    else:
        said = f"{job.state.lower()}{where} (runtime {job.runtime_id or '-'})"
    if job.record is not None:
        said += f"; training: {recordtext.one_line(job.record, job.state)}"
    return said


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
    return moment.astimezone(UTC).strftime(_MICRO_TIME)
