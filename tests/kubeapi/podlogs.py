"""``pods/{name}/log`` for the double: a text a test sets per batch Job, tailed.

The real control plane has no kubelet serving logs, so only the double can
prove that a failed container's last lines are kept. Every pod of the batch
Job ``job`` logs ``text``; ``tailLines`` and ``limitBytes`` are honoured as
the kubelet honours them (the last lines, then at most that many bytes).
"""

from __future__ import annotations

import threading

from . import errors
from .resources import resource
from .rest import Rest

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


class PodLogs:
    def __init__(self) -> None:
        self._texts: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def set(self, namespace: str, job: str, text: str) -> None:
        with self._lock:
            self._texts[(namespace, job)] = text

    def read(self, rest: Rest, namespace: str, pod: str, query: dict[str, str]) -> bytes:
        obj = rest.get(resource("pods"), namespace, pod)  # 404 for a pod that is gone
        job = ((obj.get("metadata") or {}).get("labels") or {}).get(JOB_NAME_LABEL, "")
        container = query.get("container", "")
        names = [c["name"] for c in obj["spec"]["containers"]]
        if container and container not in names:
            raise errors.bad_request(f"container {container} is not valid for pod {pod}")
        with self._lock:
            text = self._texts.get((namespace, job), "")
        return tail(text, query)


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
