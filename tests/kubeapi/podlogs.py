"""``pods/{name}/log`` for the double: a text a test sets per batch Job, tailed.

The real control plane has no kubelet serving logs, so only the double can
prove that a failed container's last lines are kept. Every pod of the batch
Job ``job`` logs ``text``; ``tailLines`` and ``limitBytes`` are honoured as
the kubelet honours them (the last lines, then at most that many bytes).

Each line is stamped with the double's clock when the test sets or appends it
(``append``), so ``sinceTime`` (the lines stamped at or after it) and
``timestamps=true`` (each line after its RFC 3339 time, as the kubelet writes
it) are honoured too, before ``tailLines`` and ``limitBytes``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

from . import errors
from .resources import resource
from .rest import Rest

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


Stamped = list[tuple[datetime, str]]  # each line (its newline kept) and its time


class PodLogs:
    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._texts: dict[tuple[str, str], Stamped] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def set(self, namespace: str, job: str, text: str) -> None:
        with self._lock:
            self._texts[(namespace, job)] = self._stamped(text)

    def append(self, namespace: str, job: str, text: str) -> None:
        with self._lock:
            self._texts.setdefault((namespace, job), []).extend(self._stamped(text))

    def _stamped(self, text: str) -> Stamped:
        now = self._clock()
        return [(now, line) for line in text.splitlines(keepends=True)]

    def read(self, rest: Rest, namespace: str, pod: str, query: dict[str, str]) -> bytes:
        obj = rest.get(resource("pods"), namespace, pod)  # 404 for a pod that is gone
        job = ((obj.get("metadata") or {}).get("labels") or {}).get(JOB_NAME_LABEL, "")
        container = query.get("container", "")
        names = [c["name"] for c in obj["spec"]["containers"]]
        if container and container not in names:
            raise errors.bad_request(f"container {container} is not valid for pod {pod}")
        with self._lock:
            lines = list(self._texts.get((namespace, job), []))
        if "sinceTime" in query:
            since = datetime.fromisoformat(query["sinceTime"].replace("Z", "+00:00"))
            lines = [(at, line) for at, line in lines if at >= since]
        if query.get("timestamps") == "true":
            return tail("".join(f"{_rfc3339_nano(at)} {line}" for at, line in lines), query)
        return tail("".join(line for _, line in lines), query)


def _rfc3339_nano(moment: datetime) -> str:
    """As Go's RFC3339Nano writes it (the kubelet's): trailing zeros of the fraction cut."""
    whole = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{moment.microsecond:06d}000".rstrip("0")
    return f"{whole}{'.' + fraction if fraction else ''}Z"


def tail(text: str, query: dict[str, str]) -> bytes:
    """``text`` as a kubelet serves a log: the last ``tailLines``, then at most
    ``limitBytes`` (the fake kubelet of the real control plane serves it the same way)."""
    lines = text.splitlines(keepends=True)
    if query.get("tailLines", "").isdigit():
        lines = lines[len(lines) - min(len(lines), int(query["tailLines"])) :]
    data = "".join(lines).encode()
    if query.get("limitBytes", "").isdigit():
        data = data[: int(query["limitBytes"])]
    return data
