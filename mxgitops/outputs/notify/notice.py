"""What one notification says, as plain text fields, before any provider's markup.

A `Notice` is one transition of one job (or of the sync); everything in it came from
Git, the cluster or a log and is untrusted: bounded here, escaped by each provider
(`chat.py`, `webhook.py`) for its own markup. `neutral` takes the sting out of
mentions every provider shares (`@channel`, `@everyone`, `<@U123>`, `<!here>`, Teams'
`<at>`): a word joiner after each `@` and `<` keeps the text as it reads and makes
no mention or tag of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mxgitops.outputs.summary import JobSummary
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.runtimes.shared.failure import Failure

MAX_FIELD = 300  # characters of a reason, a state, a name
MAX_LOG_LINES = 15
MAX_LOG = 1500  # characters of a log tail
GROUP_SHOWN = 5  # jobs a grouped message details; the others are counted
WORD_JOINER = "\u2060"
_MENTION = re.compile(r"(?<=@)(?=[\w.!-])|(?<=<)")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
# event -> how its headline says it
HEADLINES = {
    "failed": "failed",
    "succeeded": "succeeded",
    "disrupted": "was disrupted and runs again",
    "waiting": "is still waiting",
    "sync-failed": "could not be synced",
}


@dataclass(frozen=True)
class Notice:
    event: str  # of settings.EVENTS
    key: str  # the transition, as the outbox keeps it
    namespace: str = ""  # "" for the sync's own trouble (invalid manifests)
    name: str = ""
    state: str = ""
    reason: str = ""
    commit: str = ""
    exit_code: int | None = None
    log: str = ""  # the failed container's last lines
    training: str = ""  # the training record's summary, one line
    commit_url: str = ""
    dashboard_url: str = ""

    @property
    def subject(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else "the jobs repository"

    @property
    def headline(self) -> str:
        return f"{self.subject} {HEADLINES[self.event]}"

    def facts(self) -> list[tuple[str, str]]:
        """(label, value) of what is known, in the order a reader wants them."""
        facts = [("State", self.state)] if self.state else []
        if self.reason:
            facts.append(("Why", self.reason))
        if self.exit_code is not None:
            facts.append(("Exit code", str(self.exit_code)))
        if self.commit:
            facts.append(("Commit", self.commit[:12]))
        if self.training:
            facts.append(("Training", self.training))
        return facts

    def links(self) -> list[tuple[str, str]]:
        links = [("Commit", self.commit_url)] if self.commit_url else []
        if self.dashboard_url:
            links.append(("Dashboard", self.dashboard_url))
        return links


def for_job(job: JobSummary, event: str, key: str, commit_url: str, dashboard_url: str) -> Notice:
    failure = Failure.from_mapping(job.failure) if job.failure else None
    reason = job.state_reason or job.reason
    if failure is not None:
        reason = failure.describe()
    if event == "sync-failed":
        reason = "; ".join(job.errors)
    return Notice(
        event=event,
        key=key,
        namespace=clean(job.namespace, 63),
        name=clean(job.name, 253),
        state=clean(job.state, 40),
        reason=clean(reason, MAX_FIELD),
        commit=clean(job.commit, 64),
        exit_code=failure.exit_code if failure is not None else None,
        log=tail(failure.log) if failure is not None else "",
        training=training_line(job.record) if job.record is not None else "",
        commit_url=commit_url,
        dashboard_url=dashboard_url,
    )


def for_problems(problems: Sequence[str], key: str, commit: str, commit_url: str) -> Notice:
    shown = "; ".join(problems[:3]) + (
        f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
    )
    return Notice(
        event="sync-failed",
        key=key,
        reason=clean(f"{len(problems)} invalid: {shown}", MAX_FIELD),
        commit=clean(commit, 64),
        commit_url=commit_url,
    )


def training_line(record: TrainingRecord) -> str:
    """Epochs, the final metrics, the duration and the GPU-hours, as far as known."""
    parts = []
    shown = record.progress
    if shown.epochs_done or shown.epochs:
        parts.append(f"epochs {shown.epochs_done}/{shown.epochs or '?'}")
    for name, value in sorted(record.log.latest.items())[:3]:
        parts.append(f"{name} {value:.4g}")
    if (seconds := record.duration_seconds) is not None:
        parts.append(_duration(seconds))
    if record.resources is not None and record.resources.gpu_hours:
        parts.append(f"{record.resources.gpu_hours:.2f} GPU-hours")
    return clean(", ".join(parts), MAX_FIELD)


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def clean(text: str, limit: int) -> str:
    """`text` on one line, without control or direction characters, at most `limit`."""
    flat = _CONTROL.sub("", " ".join(str(text).split()))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def tail(log: str) -> str:
    """The last lines of a log, without control characters, within `MAX_LOG`."""
    lines = [_CONTROL.sub("", line.rstrip())[:200] for line in log.splitlines()][-MAX_LOG_LINES:]
    text = "\n".join(lines)
    return text if len(text) <= MAX_LOG else "…" + text[-(MAX_LOG - 1) :]


def neutral(text: str) -> str:
    """`text` with no mention left in it: `@channel` reads the same and tells nobody."""
    return _MENTION.sub(WORD_JOINER, text)


def fit(text: str, limit: int, escape: Callable[[str], str] = lambda s: s) -> str:
    """`escape(text)` within `limit` characters: the raw text is cut (never the escaped,
    which could leave half an entity) until its escaped form and an ellipsis fit."""
    out = escape(text)
    raw = text
    while len(out) > limit and raw:
        raw = raw[: max(0, len(raw) - max(1, len(out) - limit + 1))]
        out = escape(raw) + "…"
    return out if len(out) <= limit else "…"[:limit]
