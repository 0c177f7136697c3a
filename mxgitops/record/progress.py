"""How far a run is: epochs done of how many, the percentage, and when it should end.

The total number of epochs is the program's own word when its log gives one (the
opt-in line's `epochs`, the Gluon estimator's `Train for N epochs.`), else what the
job declares (`declared_epochs`): the annotation `mxgitops.io/epochs` on the worker's
pod template, else `--num-epochs N` / `--epochs N` (or `=N`, or `--num_epochs`) in the
`mxnet` container's command or args (the last one, as argparse reads it).

Progress counts finished epochs, plus the fraction of the current one when the
opt-in line gives `step` and `steps`. The ETA is the mean time of the epochs seen
(`Time cost=`, `Finished in`) times the epochs left: an estimate, as the last epochs
may be slower or faster.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from mxgitops.model import CONTAINER_NAME, MxJob, ReplicaType
from mxgitops.record.reading import TrainingLog

EPOCHS_ANNOTATION = "mxgitops.io/epochs"
MAX_EPOCHS = 1_000_000
_FLAG = re.compile(r"--(?:num[-_]epochs|epochs)(?:=(\S+))?")
_MAX_ARGUMENTS = 1000  # words looked at in one container's command and args


@dataclass(frozen=True)
class Progress:
    epochs_done: int
    epochs: int | None  # the total, when known
    epoch: int | None  # the epoch the latest line was about, counted from 1
    step: int | None
    percent: float | None  # 0 to 100, when the total is known
    eta_seconds: float | None  # when the total and an epoch's time are known


def progress(log: TrainingLog, declared: int | None = None) -> Progress:
    """`log`'s progress, with `declared` epochs (the job's) when the log gives none."""
    total = log.epochs or declared
    done = float(log.epochs_done)
    if not log.finished and log.step is not None and log.steps:
        done += min(log.step, log.steps) / log.steps
    percent = eta = None
    if total:
        percent = round(min(100.0, 100.0 * done / total), 1)
        left = max(0.0, total - done)
        if log.epoch_seconds:
            mean = sum(log.epoch_seconds.values()) / len(log.epoch_seconds)
            eta = round(left * mean, 1)
        elif left == 0:
            eta = 0.0
    return Progress(
        epochs_done=log.epochs_done,
        epochs=total,
        epoch=log.epoch,
        step=log.step,
        percent=percent,
        eta_seconds=eta,
    )


def declared_epochs(job: MxJob) -> int | None:
    """The epochs `job` says it runs (its worker's annotation, else its mxnet
    container's flag), or None."""
    worker = job.replica(ReplicaType.WORKER)
    if worker is None:
        return None
    template = worker.template
    annotations = _mapping(_mapping(template.get("metadata")).get("annotations"))
    from_annotation = _epochs(annotations.get(EPOCHS_ANNOTATION))
    if from_annotation is not None:
        return from_annotation
    found: int | None = None
    for word, following in _arguments(template):
        match = _FLAG.fullmatch(word)
        if match:
            value = _epochs(match.group(1) if match.group(1) is not None else following)
            found = value if value is not None else found
    return found


def _arguments(template: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    """Each word of the mxnet container's command and args (a shell's `-c` string
    split into words too), with the word after it."""
    containers = _mapping(template.get("spec")).get("containers")
    for container in containers if isinstance(containers, list) else []:
        if not isinstance(container, Mapping) or container.get("name") != CONTAINER_NAME:
            continue
        words: list[str] = []
        for key in ("command", "args"):
            given = container.get(key)
            for item in given if isinstance(given, list) else []:
                if isinstance(item, str):
                    words.extend(item.split())
        words = words[:_MAX_ARGUMENTS]
        for index, word in enumerate(words):
            yield word, words[index + 1] if index + 1 < len(words) else None


def _epochs(value: object) -> int | None:
    text = value.strip() if isinstance(value, str) else None
    if not text or not text.isascii() or not text.isdigit() or len(text) > 7:
        return None
    number = int(text)
    return number if 1 <= number <= MAX_EPOCHS else None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
