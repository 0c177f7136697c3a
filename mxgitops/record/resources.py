"""What a run used: GPU-hours and CPU-core-hours, from its pods' requests and times.

Each pod counts its requests (what the scheduler reserved for it, used or not)
times its running time: from `status.startTime` to the last `finishedAt` of its
containers, or to `now` while one still runs. GPUs are counted as the policy counts
them (`pod_gpus`: containers and native sidecars); CPU cores are the requests of its
containers and native sidecars (a container with a limit and no request requests
its limit, as the API server defaults it), short-lived init containers left out.

`estimate` says the figure is not final: a pod still running (`now` stands in for
its end), or a pod without a start time (not counted), or a time that cannot be read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from mxgitops.manifests.policy import pod_gpus
from mxgitops.manifests.quantity import QuantityError, parse

_HOUR = 3600.0
MAX_PODS = 100_000
# Past these a pod's requests are not a real pod's (a node has no million cores): the
# pod is left out and the figure is an estimate, rather than a number without meaning.
MAX_GPUS_PER_POD = 1024
MAX_CORES_PER_POD = 100_000


@dataclass(frozen=True)
class ResourceUse:
    gpu_hours: float
    cpu_core_hours: float
    pods: int  # pods counted
    estimate: bool
    started: str = ""  # RFC 3339: the first pod's start
    finished: str = ""  # RFC 3339: the last container's end, when every pod ended


def resource_use(pods: Iterable[Mapping[str, Any]], *, now: datetime) -> ResourceUse:
    """The use of `pods` (objects as the API returns them) up to `now`."""
    gpu_hours = cpu_hours = 0.0
    counted = 0
    estimate = False
    starts: list[datetime] = []
    ends: list[datetime] = []
    for pod in list(pods)[:MAX_PODS]:
        status = _mapping(pod.get("status"))
        start = _time(status.get("startTime"))
        if start is None:
            estimate = True
            continue
        end = _finished(status)
        if end is None:
            estimate = True
        hours = max(0.0, ((end or now) - start).total_seconds()) / _HOUR
        spec = _mapping(pod.get("spec"))
        try:
            gpus = float(pod_gpus({"spec": spec}))
            cores = float(_cpu_cores(spec))
        except (QuantityError, ArithmeticError):
            gpus = cores = -1.0
        if not (0 <= gpus <= MAX_GPUS_PER_POD and 0 <= cores <= MAX_CORES_PER_POD):
            estimate = True
            continue
        gpu_hours += gpus * hours
        cpu_hours += cores * hours
        counted += 1
        starts.append(start)
        ends.append(end or now)
    return ResourceUse(
        gpu_hours=round(gpu_hours, 4),
        cpu_core_hours=round(cpu_hours, 4),
        pods=counted,
        estimate=estimate,
        started=_rfc3339(min(starts)) if starts else "",
        finished=_rfc3339(max(ends)) if ends and not estimate else "",
    )


def _finished(status: Mapping[str, Any]) -> datetime | None:
    """The last container's end, when every container ended; else None."""
    statuses = status.get("containerStatuses")
    if not isinstance(statuses, list) or not statuses:
        return None
    ends = []
    for container in statuses:
        state = _mapping(_mapping(container).get("state"))
        end = _time(_mapping(state.get("terminated")).get("finishedAt"))
        if end is None:
            return None
        ends.append(end)
    return max(ends)


def _cpu_cores(spec: Mapping[str, Any]) -> Decimal:
    containers = _list(spec.get("containers"))
    sidecars = [c for c in _list(spec.get("initContainers")) if c.get("restartPolicy") == "Always"]
    total = Decimal(0)
    for container in containers + sidecars:
        resources = _mapping(container.get("resources"))
        requests, limits = _mapping(resources.get("requests")), _mapping(resources.get("limits"))
        cpu = requests.get("cpu", limits.get("cpu"))
        if cpu is not None:
            total += max(Decimal(0), parse(cpu))
    return total


def _time(value: object) -> datetime | None:
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []
