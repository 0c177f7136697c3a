"""The last lines of a failed container's log, read before anything deletes them.

A job seen failed for the first time is recorded in the ledger with why it
failed (`plan.py`, `runtime.failure.Failure`); in that same sync, before apply
deletes anything (cleanPodPolicy, stopping a finished job), this module
reads the tail of the failed `mxnet` container's log and puts it into the
failure the ledger keeps. Only those newly failed replicas are read, so a
sync that records no failure makes no request here, with 10 or 100,000 jobs.

A log that cannot be read (no kubelet answering, RBAC without `pods/log`)
never fails the sync: the failure says "log unavailable: why".
"""

from __future__ import annotations

from typing import Protocol

from mxgitops.errors import ClusterError
from mxgitops.kube.clustertext import said
from mxgitops.planning.bookkeeping import LedgerAction
from mxgitops.planning.changes import Plan
from mxgitops.planning.ledger import JobKey
from mxgitops.runtimes.shared.failure import Failure

DEFAULT_LINES = 20
MAX_LINES = 1000
MAX_BYTES = 2048  # kept per failed job, in its ledger entry: the end of the log wins
_READ_BYTES = 64 * 1024  # read at most this much of the tail, then keep MAX_BYTES of it


class LogAPI(Protocol):
    def pod_log(
        self, namespace: str, pod: str, *, container: str, tail_lines: int, limit_bytes: int
    ) -> str: ...


def capture(plan: Plan, api: LogAPI | None, *, lines: int, max_bytes: int = MAX_BYTES) -> Plan:
    """`plan` with the log tails of the jobs it records as newly failed."""
    if api is None or lines <= 0:
        return plan
    logs: dict[JobKey, str] = {}
    for change in plan.ledger_changes:
        if change.action is not LedgerAction.RECORD or not change.entry.failure:
            continue
        failure = Failure.from_json(change.entry.failure)
        if failure is not None and failure.pod:
            logs[change.key] = _tail(api, change.entry.namespace, failure, lines, max_bytes)
    return plan.with_failure_logs(logs) if logs else plan


def _tail(api: LogAPI, namespace: str, failure: Failure, lines: int, max_bytes: int) -> str:
    try:
        text = api.pod_log(
            namespace,
            failure.pod,
            container=failure.container,
            tail_lines=lines,
            limit_bytes=_READ_BYTES,
        )
    except ClusterError as exc:
        return f"log unavailable: {' '.join(str(exc).split())[:300]}"
    # Each line as the cluster's other text is kept (`clustertext`): nothing hidden in it.
    return keep_end("\n".join(said(line, max_bytes) for line in text.split("\n")), max_bytes)


def keep_end(text: str, max_bytes: int) -> str:
    """The end of `text` within `max_bytes` of UTF-8, starting at a line when it was cut."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    end = data[-max_bytes:].decode("utf-8", "ignore")
    newline = end.find("\n")
    return end[newline + 1 :] if 0 <= newline < len(end) - 1 else end
