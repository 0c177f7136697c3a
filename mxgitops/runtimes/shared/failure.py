"""Why a job failed, read from its objects while they exist: pure.

The state alone (`WORKER Failed`) tells nobody what to fix. The failed
replica's newest pod still says it: the `mxnet` container's exit code,
reason (`OOMKilled`, `Error`) and termination message, and the batch Job's
`Failed` condition (`BackoffLimitExceeded`, `DeadlineExceeded`, a pod
failure policy rule). Both go once `cleanPodPolicy` or a TTL removes the
objects, so the planner copies a `Failure` into the ledger entry of the job
the sync first sees failed, together with the last lines of the container's
log, which the sync reads (`failurelog.py`) before anything is deleted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from mxgitops.model import CONTAINER_NAME

MAX_MESSAGE = 1024  # characters of a termination or condition message kept


@dataclass(frozen=True)
class Failure:
    replica: str  # e.g. "WORKER 0"
    exit_code: int | None = None
    reason: str = ""  # the container's, then the batch Job's: "OOMKilled; BackoffLimitExceeded"
    message: str = ""
    pod: str = ""  # whose log is read; empty once the pod is gone
    container: str = CONTAINER_NAME
    log: str = ""  # the last lines of the failed container's log, or why there are none

    def describe(self) -> str:
        code = f" exited {self.exit_code}" if self.exit_code is not None else " failed"
        why = f" ({self.reason})" if self.reason else ""
        return f"{self.replica}{code}{why}" + (f": {self.message}" if self.message else "")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Failure:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    @classmethod
    def from_json(cls, text: str) -> Failure | None:
        try:
            data = json.loads(text)
            return cls.from_mapping(data) if isinstance(data, dict) else None
        except (ValueError, TypeError):
            return None

    def with_log(self, log: str) -> Failure:
        return replace(self, log=log)
