"""The record of one run (one runtime of one job, from its start to its end).

What its log showed (`TrainingLog`), the epochs its job declares, where and when it
ran, and what it used. A sync folds the next chunk of the log into the record the
note kept (`with_chunk`), and the pods it sees into its times and resources
(`with_pods`); the stored forms are `stored.py`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from mxgitops.record.progress import Progress, progress
from mxgitops.record.reading import TrainingLog, read
from mxgitops.record.resources import ResourceUse, resource_use


@dataclass(frozen=True)
class TrainingRecord:
    log: TrainingLog = field(default_factory=TrainingLog)
    declared_epochs: int | None = None  # `progress.declared_epochs` of the job
    cluster: str = ""
    resources: ResourceUse | None = None  # its times: the run's start and end
    # RFC 3339: the time of the last whole line read of worker 0's log ("" none yet),
    # where the next sync's read starts (`sinceTime`)
    read_until: str = ""

    def with_chunk(self, chunk: str, *, at_end: bool = False) -> TrainingRecord:
        return replace(self, log=read(self.log, chunk, at_end=at_end))

    def with_pods(self, pods: Iterable[Mapping[str, Any]], *, now: datetime) -> TrainingRecord:
        return replace(self, resources=resource_use(pods, now=now))

    @property
    def progress(self) -> Progress:
        return progress(self.log, self.declared_epochs)

    @property
    def started(self) -> str:
        return self.resources.started if self.resources else ""

    @property
    def finished(self) -> str:
        return self.resources.finished if self.resources else ""

    @property
    def duration_seconds(self) -> float | None:
        if not (self.started and self.finished):
            return None
        start = datetime.fromisoformat(self.started.replace("Z", "+00:00"))
        end = datetime.fromisoformat(self.finished.replace("Z", "+00:00"))
        return max(0.0, (end - start).total_seconds())


def downsample(points: Mapping[int, float], most: int) -> dict[int, float]:
    """At most `most` (at least 2) of `points`, evenly spaced by position, the first and
    the last kept."""
    epochs = sorted(points)
    if len(epochs) <= most:
        return {epoch: points[epoch] for epoch in epochs}
    most = max(2, most)
    picked = sorted({epochs[round(i * (len(epochs) - 1) / (most - 1))] for i in range(most)})
    return {epoch: points[epoch] for epoch in picked}
