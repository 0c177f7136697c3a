"""Prometheus metrics of the last sync, pushed to a Pushgateway.

A CronJob's pod lives for one sync and cannot be scraped, so each sync pushes one
group (`job="mxgitops"`, `instance=<--instance>`: no per-pod label, so a new pod
replaces the last one's values instead of adding a series). The group is pushed with
POST, which replaces only the metrics pushed: `mxgitops_last_success_timestamp_seconds`
is pushed only by a sync that succeeded, so it keeps its value through failures, and
an alert can say how long ago the last success was. The Pushgateway adds
`push_time_seconds` itself: the alert that it was not updated reads that.

The runs' training records (`training_registry`: progress, a few metrics, resource
use, by job) are a second group, `group="training"`, pushed with PUT by each sync that
has a summary: PUT replaces the whole group, so a run gone from the summary leaves no
series behind (a POST keeps a family it is sent empty, as the Pushgateway showed).
A sync that stops before its summary leaves that group as it was.

The webhook receiver (`mxgitops receive`) runs for long, so it is scraped instead:
its three counters (`ReceiverCounters`) are served at its `/metrics`.

The registry is this module's own: nothing of the process (its GC, its threads) is
pushed, and pushing twice in one process (tests) starts from nothing each time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit, urlunsplit

from mxgitops.errors import OutputError
from mxgitops.outputs import recordtext
from mxgitops.outputs.deadline import within
from mxgitops.outputs.summary import Summary
from mxgitops.planning.changes import Action
from mxgitops.source.gitauth import redact

# prometheus_client is imported where a registry is built or pushed, not with this
# module: every sync imports the sinks, and only one that has a Pushgateway needs it
# (about a tenth of a second of a no-op's start).
if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

JOB = "mxgitops"
PHASES = ("git", "validate", "read", "apply", "note", "status", "events", "notify")
PUSH_TIMEOUT = 10.0
MAX_METRICS_PER_RUN = 4  # training metrics pushed per run: a bound on the series
TRAINING_GROUP = "training"
_WRITING = frozenset(
    {
        Action.CREATE,
        Action.REPLACE,
        Action.REPAIR,
        Action.UPDATE,
        Action.DELETE,
        Action.CLEAN,
        Action.STOP,
    }
)
STATES = ("Pending", "Running", "Succeeded", "Failed", "Suspended", "Waiting", "Deleting")


@dataclass(frozen=True)
class SyncMetrics:
    """What one sync pushes."""

    instance: str
    started: float  # epoch seconds
    finished: float
    exit_code: int
    summary: Summary | None = None  # None: the sync stopped before it had one
    errors: Mapping[str, int] = field(default_factory=dict)  # phase -> errors

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0


def registry_for(metrics: SyncMetrics) -> CollectorRegistry:
    from prometheus_client import CollectorRegistry, Gauge, Info

    registry = CollectorRegistry(auto_describe=True)

    def gauge(name: str, doc: str, value: float) -> None:
        Gauge(name, doc, registry=registry).set(value)

    gauge("mxgitops_sync_start_timestamp_seconds", "When the last sync started.", metrics.started)
    gauge("mxgitops_sync_end_timestamp_seconds", "When the last sync ended.", metrics.finished)
    gauge(
        "mxgitops_sync_duration_seconds",
        "How long the last sync took.",
        max(0.0, metrics.finished - metrics.started),
    )
    gauge("mxgitops_sync_success", "1 if the last sync succeeded, else 0.", metrics.succeeded)
    gauge("mxgitops_sync_exit_code", "The exit code of the last sync.", metrics.exit_code)
    if metrics.succeeded:
        gauge(
            "mxgitops_last_success_timestamp_seconds",
            "When the last successful sync ended.",
            metrics.finished,
        )
    errors = Gauge(
        "mxgitops_sync_errors", "Errors of the last sync, by phase.", ["phase"], registry=registry
    )
    for phase in PHASES:
        errors.labels(phase).set(metrics.errors.get(phase, 0))
    summary = metrics.summary
    if summary is not None:
        _jobs(summary, registry)
        Info("mxgitops_sync_commit", "The commit the last sync synced.", registry=registry).info(
            {"commit": summary.commit, "version": summary.version}
        )
    return registry


def _jobs(summary: Summary, registry: CollectorRegistry) -> None:
    from prometheus_client import Gauge

    # Every state and action has a value, 0 too: a series that the last sync did not
    # push would keep the value of the one before (a push replaces whole families).
    states: dict[str, int] = dict.fromkeys(STATES, 0)
    actions: dict[str, int] = dict.fromkeys((a.value for a in Action), 0)
    objects: dict[str, int] = dict.fromkeys((a.value for a in Action if a in _WRITING), 0)
    for job in summary.jobs:
        if job.state:
            states[job.state] = states.get(job.state, 0) + 1
        actions[job.action] = actions.get(job.action, 0) + 1
        if job.objects and not job.errors:
            objects[job.action] = objects.get(job.action, 0) + len(job.objects)
    by_state = Gauge("mxgitops_jobs", "Jobs by state.", ["state"], registry=registry)
    for state, count in states.items():
        by_state.labels(state).set(count)
    by_action = Gauge(
        "mxgitops_sync_jobs", "Jobs of the last sync, by action.", ["action"], registry=registry
    )
    for action, count in actions.items():
        by_action.labels(action).set(count)
    written = Gauge(
        "mxgitops_sync_objects_written",
        "Objects the last sync wrote, by the action of their job.",
        ["action"],
        registry=registry,
    )
    for action, count in objects.items():
        written.labels(action).set(count)
    Gauge("mxgitops_invalid_manifests", "Invalid manifests.", registry=registry).set(
        len(summary.problems)
    )


def training_registry(summary: Summary) -> CollectorRegistry:
    """Each run's training record: its progress, the latest value of a few metrics (a
    metric's name only ever a label value, sanitised: `recordtext.label_value`), and its
    resource use. Pushed as a group of its own, replaced whole (`push`)."""
    from prometheus_client import CollectorRegistry, Gauge

    registry = CollectorRegistry(auto_describe=True)
    labels = ["namespace", "name"]
    ratio = Gauge(
        "mxgitops_training_progress_ratio",
        "How far a run's training is, from 0 to 1 (epochs done of the epochs it runs).",
        labels,
        registry=registry,
    )
    latest = Gauge(
        "mxgitops_training_metric",
        "The latest value of a run's training metric, by name (a few per run).",
        [*labels, "metric"],
        registry=registry,
    )
    gpu = Gauge(
        "mxgitops_training_gpu_hours",
        "GPU-hours a run's pods requested (requests times running time).",
        labels,
        registry=registry,
    )
    cpu = Gauge(
        "mxgitops_training_cpu_core_hours",
        "CPU-core-hours a run's pods requested (requests times running time).",
        labels,
        registry=registry,
    )
    for job in summary.jobs:
        record = job.record
        if record is None:
            continue
        percent = record.progress.percent
        if percent is not None:
            ratio.labels(job.namespace, job.name).set(percent / 100)
        values = recordtext.latest_values(record, MAX_METRICS_PER_RUN)
        for name, value in values.items():
            latest.labels(job.namespace, job.name, recordtext.label_value(name)).set(value)
        use = record.resources
        if use is not None and recordtext.finite(use.gpu_hours + use.cpu_core_hours):
            gpu.labels(job.namespace, job.name).set(use.gpu_hours)
            cpu.labels(job.namespace, job.name).set(use.cpu_core_hours)
    return registry


def push(gateway: str, metrics: SyncMetrics, *, timeout: float = PUSH_TIMEOUT) -> None:
    """Push the group within `timeout` seconds, the whole call (a Pushgateway that
    answers a byte a second included); an OutputError if the Pushgateway cannot take
    it. Credentials in `gateway`'s URL are sent as basic auth and never shown."""
    from prometheus_client import push_to_gateway, pushadd_to_gateway

    url, shown, secrets, handler = _target(gateway)

    def pushing() -> None:
        pushadd_to_gateway(
            url,
            job=JOB,
            registry=registry_for(metrics),
            grouping_key={"instance": metrics.instance},
            timeout=timeout,
            handler=handler,
        )
        if metrics.summary is not None:
            push_to_gateway(
                url,
                job=JOB,
                registry=training_registry(metrics.summary),
                grouping_key={"instance": metrics.instance, "group": TRAINING_GROUP},
                timeout=timeout,
                handler=handler,
            )

    try:
        within(timeout, pushing, f"pushing the metrics to {shown}")
    except (OSError, ValueError) as exc:  # URLError and HTTPError are OSErrors
        said = redact(str(exc), secrets)
        raise OutputError(f"the metrics were not pushed to {shown}: {said}") from None


def _target(gateway: str) -> tuple[str, str, tuple[str, ...], Callable[..., Callable[[], None]]]:
    """The URL to push to (without credentials), the one to show, the secrets to keep
    out of messages, and the handler that authenticates with the URL's credentials."""
    from prometheus_client.exposition import basic_auth_handler, default_handler

    parts = urlsplit(gateway if "://" in gateway else f"http://{gateway}")
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    secrets = tuple(s for s in (parts.password, password) if s)
    plain = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    if not user and not password:
        return plain, redact(gateway, secrets), secrets, default_handler

    def handler(
        url: str, method: str, timeout: float | None, headers: list[tuple[str, str]], data: bytes
    ) -> Callable[[], None]:
        return basic_auth_handler(url, method, timeout, headers, data, user, password)

    return plain, redact(gateway, secrets), secrets, handler


class ReceiverCounters:
    """The webhook receiver's counters, in a registry of their own: requests received,
    requests whose signature was verified, and the syncs (Jobs) started."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter

        self.registry = CollectorRegistry(auto_describe=True)
        self.received = Counter(
            "mxgitops_webhook_received", "Webhook requests received.", registry=self.registry
        )
        self.verified = Counter(
            "mxgitops_webhook_verified",
            "Webhook requests whose signature matched the secret.",
            registry=self.registry,
        )
        self.syncs_started = Counter(
            "mxgitops_webhook_syncs_started",
            "Jobs started from the CronJob for pushes.",
            registry=self.registry,
        )

    def exposition(self) -> tuple[bytes, str]:
        """The counters in Prometheus' text format, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
