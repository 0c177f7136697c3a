"""What the webhook receiver asks of the cluster: its CronJob (GET), a Job started from
it (create), and the namespace's Jobs (LIST, then a watch), so that it knows whether
a sync runs. Nothing else: its Role grants exactly these (cronjob/components/receiver).

A watch is one long GET whose body is a stream of JSON lines, one event each, read as
it comes. It ends after `timeoutSeconds` (the server closes it; the caller watches
again from the last resourceVersion it saw), or with an ERROR event: 410 Expired (the
resourceVersion is older than the server keeps; or a 410 answer instead of the
stream) is `WatchExpired`, and the caller lists again.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from mxgitops.errors import ClusterClientError, ClusterError
from mxgitops.kube import transport
from mxgitops.kube.calls import Calls, path_of
from mxgitops.kube.exchange import Response
from mxgitops.objects import Kind, KubeObject

MAX_EVENT = 4 << 20  # bytes of one watch event: an object is at most etcd's 1.5 MiB
WATCH_GRACE = 30.0  # seconds a watch's call may outlast its timeoutSeconds
_MESSAGE_SHOWN = 300  # characters of a watch's ERROR message in the error


class WatchExpired(ClusterError):
    """The watch's resourceVersion is too old (410): list again."""


class CronJobRuns(Calls):
    """The receiver's requests: a CronJob, the Jobs started from it."""

    def cronjob(self, namespace: str, name: str, *, budget: float | None = None) -> KubeObject:
        """The CronJob, read within `budget` seconds (else the request timeout)."""
        path = path_of(Kind.CRON_JOB, namespace, name)
        try:
            return self._call("GET", path, read=transport.read_object, budget=budget)
        except ClusterClientError as exc:
            if exc.status != 404:
                raise
            raise ClusterClientError(
                f"the CronJob {namespace}/{name} does not exist", status=404, reason="NotFound"
            ) from exc

    def create_job(self, job: KubeObject) -> bool:
        """Create `job`; False if a Job of its name exists (made before)."""
        try:
            self._request("POST", path_of(Kind.JOB, job["metadata"]["namespace"]), body=job)
        except ClusterClientError as exc:
            if exc.reason == "AlreadyExists":
                return False
            raise
        return True

    def list_jobs(self, namespace: str) -> tuple[list[KubeObject], str]:
        """The namespace's Jobs and the list's resourceVersion (to watch from)."""
        answer = self._request("GET", path_of(Kind.JOB, namespace))
        return list(answer.get("items") or []), str(answer["metadata"]["resourceVersion"])

    def watch_jobs(
        self,
        namespace: str,
        since: str,
        on_event: Callable[[str, KubeObject], None],
        *,
        timeout: int,
    ) -> str:
        """Watch the namespace's Jobs from resourceVersion `since` for up to `timeout`
        seconds, calling `on_event(type, job)` for each ADDED, MODIFIED or DELETED;
        the last resourceVersion seen (bookmarks too). The objects are as the server
        sent them: the caller checks them."""
        seen = [since]

        def event(line: bytes) -> None:
            said = json.loads(line)
            if not isinstance(said, dict):  # the transport makes this a ClusterError
                raise ValueError("a watch event that is not an object")
            kind, obj = said.get("type"), said.get("object") or {}
            if kind == "ERROR":
                status = obj if isinstance(obj, dict) else {}
                if status.get("code") == 410:
                    raise WatchExpired(f"the watch of Jobs in {namespace} expired")
                message = str(status.get("message"))[:_MESSAGE_SHOWN]
                raise ClusterError(f"the watch of Jobs in {namespace} failed: {message!r}")
            metadata = obj.get("metadata") if isinstance(obj, dict) else None
            version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
            if isinstance(version, str) and version:
                seen.append(version)
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                on_event(kind, obj)

        query = {
            "watch": "1",
            "resourceVersion": since,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout),
        }
        try:
            self._call(
                "GET",
                path_of(Kind.JOB, namespace),
                query=query,
                read=lambda response: _lines(response, event),
                budget=timeout + WATCH_GRACE,
            )
        except ClusterClientError as exc:
            if exc.status == 410:  # refused before the stream began, rather than in it
                raise WatchExpired(f"the watch of Jobs in {namespace} expired") from exc
            raise
        return seen[-1]


def _lines(response: Response, each: Callable[[bytes], None]) -> None:
    """Call `each` with every line of the body as it arrives (a watch's events come
    one line at a time, so nothing waits for a buffer to fill)."""
    line = bytearray()
    while byte := response.read(1):
        if byte != b"\n":
            line += byte
            if len(line) > MAX_EVENT:
                raise ValueError(f"a watch event longer than {MAX_EVENT} bytes")
            continue
        if line.strip():
            each(bytes(line))
        line.clear()
