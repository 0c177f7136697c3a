"""Where a sync's outcome goes besides stdout, the log and the note: the sinks.

Each sink is fed the same `Summary`: commit statuses on the forge (`forge/`),
Kubernetes Events (`events.py`), chat notifications (`notify/`), metrics on a
Pushgateway (`metrics.py`). The
operator's settings choose them (`sinks_for`); the jobs repository cannot. A sink
that fails is reported, one line in the summary and the log like a note that cannot
be pushed, and never undoes or stops what was applied: the sinks run after the note,
each on its own, and the metrics last, so that they count the others' failures
(`mxgitops_sync_errors{phase=...}`) and say the exit code the sync ends with.

A sync that stops with an error (the repository cannot be fetched, the cluster is
unreachable) has no summary: only the metrics hear of it (`failed`), so an alert
sees a sync that fails every time.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Protocol

from mxgitops.errors import (
    CacheBusyError,
    ConfigError,
    GitError,
    LeaseHeldError,
    ManifestError,
    MxGitOpsError,
    OutputError,
)
from mxgitops.kube import cluster as kube
from mxgitops.outputs import events, leased, metrics
from mxgitops.outputs.forge import post
from mxgitops.outputs.notify import settings as notify_settings
from mxgitops.outputs.notify.sink import Notify
from mxgitops.outputs.summary import Summary
from mxgitops.planning.bookkeeping import LedgerAction
from mxgitops.planning.changes import Plan
from mxgitops.planning.ledger import JobKey
from mxgitops.settings.config import SyncConfig, read_token
from mxgitops.state.apply import ChangeSet

log = logging.getLogger("mxgitops")
# The exit code a sync ends with: (the error that stopped it, its summary is ok, something
# it reports (the note, a sink) was not delivered). The CLI's mapping, passed in.
ExitCode = Callable[[MxGitOpsError | None, bool, bool], int]


def plain_exit_code(error: MxGitOpsError | None, ok: bool, undelivered: bool) -> int:
    """For programs that call `sync.sync` without the CLI: 0 when all is well, else 1."""
    return 0 if error is None and ok and not undelivered else 1


@dataclass(frozen=True)
class Record:
    """What the sinks are told of one sync."""

    summary: Summary | None
    started: float  # epoch seconds
    exit_code: int  # as the sync would end if every sink delivers
    errors: Mapping[str, int] = field(default_factory=dict)  # phase -> errors
    finished: tuple[JobKey, ...] = ()  # jobs first seen finished (recorded in the ledger)
    cluster: kube.Cluster | None = None  # None: no cluster was reached
    # How a sink writes to `cluster`: under the instance's Lease (`leased.py`)
    leased: leased.Leased | None = None


class Sink(Protocol):
    @property
    def phase(self) -> str:
        """Its name in mxgitops_sync_errors."""

    def deliver(self, record: Record) -> None:
        """Deliver, or raise an OutputError saying what was not delivered."""


@dataclass(frozen=True)
class Statuses:
    settings: post.StatusSettings
    phase: str = "status"

    def deliver(self, record: Record) -> None:
        if record.summary is not None:
            post.post(record.summary, self.settings)


@dataclass(frozen=True)
class Unusable:
    """A sink whose settings are wrong (its token missing, say): it fails every sync it
    is asked to deliver, on its own, and the others, the apply and the metrics go on."""

    phase: str
    why: str

    def deliver(self, record: Record) -> None:
        if record.summary is not None:
            raise OutputError(self.why)


@dataclass(frozen=True)
class Events:
    phase: str = "events"

    def deliver(self, record: Record) -> None:
        if record.summary is None or record.cluster is None or record.leased is None:
            return
        now = datetime.now(UTC)  # one moment: what each Event says and when it was said
        told = events.for_summary(record.summary, record.finished, now=now)
        events.write(record.cluster, told, now=now, leased=record.leased)


@dataclass(frozen=True)
class Metrics:
    gateway: str
    instance: str
    clock: Callable[[], float] = time.time
    phase: str = "metrics"

    def deliver(self, record: Record) -> None:
        metrics.push(
            self.gateway,
            metrics.SyncMetrics(
                self.instance,
                record.started,
                self.clock(),
                record.exit_code,
                record.summary,
                record.errors,
            ),
        )


def sinks_for(config: SyncConfig) -> list[Sink]:
    """The sinks the operator's settings ask for; one whose settings are wrong (the
    status token's Secret not mounted, a typo) is `Unusable`: it fails apart from the
    apply and the other sinks. A dry run has none: it changes nothing in the cluster or
    the repository (decided here only: no sink asks again)."""
    sinks: list[Sink] = []
    if config.dry_run:
        return sinks
    if config.status_provider:
        try:
            sinks.append(Statuses(_status_settings(config)))
        except ConfigError as exc:  # a token's Secret not made yet: the statuses alone fail
            sinks.append(Unusable("status", f"commit statuses: {exc}"))
    if config.events:
        sinks.append(Events())
    if config.notifications_file is not None:
        try:
            notifications = notify_settings.read_file(config.notifications_file)
            sinks.append(
                Notify(notifications, config.instance, config.state_namespace, config.repo)
            )
        except ConfigError as exc:  # a misspelt file: the notifications alone fail, saying why
            sinks.append(Unusable("notify", str(exc)))
    if config.pushgateway:
        sinks.append(Metrics(config.pushgateway, config.instance))
    return sinks


def _status_settings(config: SyncConfig) -> post.StatusSettings:
    if not config.status_token and config.status_token_file is not None:
        read_token(config.status_token_file)  # raises why it cannot be read
    return post.settings_for(
        provider=config.status_provider,
        api_url=config.status_api_url or None,
        repository=config.status_repository or None,
        repo=config.repo,
        token=config.status_token,
        url_template=config.status_url,
        timeout=config.status_timeout,
    )


def deliver(
    sinks: Sequence[Sink], record: Record, exit_code: Callable[[bool], int]
) -> tuple[str, ...]:
    """Run each sink in turn; what could not be delivered, one line each. Each sink is
    told the errors so far and the exit code as it stands, `exit_code(undelivered)`:
    the metrics, last, push what the sync ends with."""
    failures: list[str] = []
    errors = dict(record.errors)
    for sink in sinks:
        told = replace(record, errors=dict(errors), exit_code=exit_code(bool(failures)))
        try:
            sink.deliver(told)
        except OutputError as exc:
            failures.append(str(exc))
            errors[sink.phase] = errors.get(sink.phase, 0) + 1
            log.error("%s", exc, extra={"phase": sink.phase})
        except Exception as exc:  # a bug in a sink: what was applied stands all the same
            # Said by its kind and where it was raised, never its words: those of an HTTP
            # library may quote a header, and the token in it.
            failures.append(f"{sink.phase}: unexpected {type(exc).__name__}")
            errors[sink.phase] = errors.get(sink.phase, 0) + 1
            frames = "".join(traceback.format_tb(exc.__traceback__))
            log.error(
                "a bug in the %s output: %s (its message is not shown)\n%s",
                sink.phase,
                type(exc).__name__,
                frames,
                extra={"phase": sink.phase},
            )
    return tuple(failures)


def failed(sinks: Sequence[Sink], started: float, error: MxGitOpsError, exit_code: int) -> None:
    """A sync stopped by `error`, with no summary: of the sinks, only the metrics have
    something to say (the others need a summary)."""
    deliver(sinks, Record(None, started, exit_code, {phase_of(error): 1}), lambda _: exit_code)


def phase_of(error: MxGitOpsError) -> str:
    """The phase of mxgitops_sync_errors that an error stopping a sync counts in."""
    if isinstance(error, (GitError, CacheBusyError)):
        return "git"
    if isinstance(error, (ManifestError, ConfigError)):
        return "validate"
    if isinstance(error, LeaseHeldError):
        return "apply"
    # ClusterError, StateDamagedError: a write's error is its job's, so what stops a
    # sync on the cluster is reading it (or its books)
    return "read"


def summary_errors(summary: Summary, note_error: str) -> dict[str, int]:
    """The errors of a sync that ran to its end, by phase."""
    return {
        "validate": len(summary.problems),
        "apply": sum(len(job.errors) for job in summary.jobs),
        "note": 1 if note_error else 0,
    }


@dataclass
class Outlet:
    """The sinks of one sync, and when it started."""

    sinks: Sequence[Sink]
    exit_code: ExitCode
    instance: str = ""  # whose Lease the sinks' cluster writes are sent under
    namespace: str = ""
    started: float = field(default_factory=time.time)

    def deliver(
        self,
        summary: Summary,
        done: Plan,
        changeset: ChangeSet | None,
        cluster: kube.Cluster | None,
        note_error: str,
    ) -> tuple[str, ...]:
        """Feed every sink this sync's summary; what could not be delivered."""
        recorded = changeset is not None and not changeset.ledger_error
        finished = tuple(
            c.key for c in done.ledger_changes if recorded and c.action is LedgerAction.RECORD
        )
        record = Record(
            summary,
            self.started,
            self.exit_code(None, summary.ok, bool(note_error)),
            summary_errors(summary, note_error),
            finished,
            cluster,
            None
            if cluster is None
            else leased.for_cluster(cluster, instance=self.instance, namespace=self.namespace),
        )
        return deliver(
            self.sinks,
            record,
            lambda undelivered: self.exit_code(None, summary.ok, bool(note_error) or undelivered),
        )


@contextmanager
def delivering(config: SyncConfig, exit_code: ExitCode) -> Iterator[Outlet]:
    """The sinks `config` asks for (one whose settings are wrong fails alone, at the
    end); a sync that stops with an error inside is told to the metrics, then raised on."""
    outlet = Outlet(sinks_for(config), exit_code, config.instance, config.state_namespace)
    try:
        yield outlet
    except MxGitOpsError as error:
        failed(outlet.sinks, outlet.started, error, exit_code(error, False, False))
        raise
