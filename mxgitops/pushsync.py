"""The receiver's link to the cluster: a verified push starts a Job from the CronJob,
at once or when the sync that runs has ended (`coalesce.py` decides which).

Two threads. The watcher lists the CronJob's namespace's Jobs once, then watches
them, and tells the coalescer which of the CronJob's runs are unfinished; a watch
that expires lists again, a failure is logged and retried after `retry_delay`. The
starter waits until a push waits and no sync runs, then reads the CronJob (its
template as it is now, like kubectl) and creates the Job. A create that fails is
logged and tried again after `retry_delay`; the push waits meanwhile. No push starts
anything before the first LIST: until then the receiver cannot know whether a sync
runs (`/healthz` says 503).

Only this module's `SyncStarter` holds the lock around the coalescer; the requests to
the cluster are made outside it, so a slow API server never holds up an answer.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from mxgitops.coalesce import Coalescer, Decision
from mxgitops.errors import MxGitOpsError
from mxgitops.kubecronjobs import WatchExpired
from mxgitops.manualjob import controlled_by, finished, job_from_cronjob, push_job_name
from mxgitops.metrics import ReceiverCounters
from mxgitops.objects import KubeObject
from mxgitops.webhook import Push

LOG = logging.getLogger("mxgitops.receiver")
RETRY_DELAY = 5.0  # seconds before a failed LIST, watch or create is tried again
WATCH_TIMEOUT = 300  # seconds of one watch request; then it watches again from where it was


class CronJobRuns(Protocol):
    """What the starter asks of the cluster (`kubecronjobs.CronJobRuns`)."""

    def cronjob(self, namespace: str, name: str) -> KubeObject: ...

    def create_job(self, job: KubeObject) -> bool: ...

    def list_jobs(self, namespace: str) -> tuple[list[KubeObject], str]: ...

    def watch_jobs(self, namespace: str, since: str, on_event: OnEvent, *, timeout: int) -> str: ...


class OnEvent(Protocol):
    def __call__(self, kind: str, job: KubeObject, /) -> None: ...


class SyncStarter:
    """Starts the CronJob's Jobs for pushes, one running and at most one waiting."""

    def __init__(
        self,
        runs: CronJobRuns,
        namespace: str,
        cronjob: str,
        counters: ReceiverCounters,
        *,
        retry_delay: float = RETRY_DELAY,
        watch_timeout: int = WATCH_TIMEOUT,
    ) -> None:
        self.runs, self.namespace, self.cronjob = runs, namespace, cronjob
        self.counters = counters
        self.retry_delay, self.watch_timeout = retry_delay, watch_timeout
        self.coalescer = Coalescer()
        self.changed = threading.Condition()
        self.listed = False  # the first LIST came back: what runs is known
        self.stopping = threading.Event()
        self._threads = [
            threading.Thread(target=self._start_loop, name="mxgitops-starter", daemon=True),
            threading.Thread(target=self._watch_loop, name="mxgitops-watcher", daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self.stopping.set()
        with self.changed:
            self.changed.notify_all()

    def push(self, push: Push) -> Decision:
        with self.changed:
            decision = self.coalescer.push(push)
            self.changed.notify_all()
        return decision

    def ready(self) -> bool:
        with self.changed:
            return self.listed

    # -- the starter ------------------------------------------------------------------

    def _start_loop(self) -> None:
        while not self.stopping.is_set():
            with self.changed:
                self.changed.wait_for(self._due)
                if self.stopping.is_set():
                    return
                push = self.coalescer.take()
                assert push is not None  # _due said so, under the same lock
                name = push_job_name(self.cronjob, push.delivery)
                self.coalescer.launch(name)
            if not self._create(name, push):
                self.stopping.wait(self.retry_delay)

    def _due(self) -> bool:
        waits = self.coalescer.waiting is not None and not self.coalescer.running()
        return self.stopping.is_set() or (self.listed and waits)

    def _create(self, name: str, push: Push) -> bool:
        said = {"job": name, "forge": str(push.forge), "delivery": push.delivery}
        what = f"{push.forge} delivery {push.delivery}, commit {push.commit or 'unknown'}"
        try:
            cronjob = self.runs.cronjob(self.namespace, self.cronjob)
            made = self.runs.create_job(job_from_cronjob(cronjob, name, what))
        except MxGitOpsError as exc:
            LOG.error("the sync's Job was not started: %s", exc, extra={**said, "error": str(exc)})
            with self.changed:
                self.coalescer.failed(name, push)
            return False
        with self.changed:
            if made:
                self.coalescer.launched(name)
            else:
                self.coalescer.existed(name)
            self.changed.notify_all()
        if made:
            self.counters.syncs_started.inc()
            LOG.info("started the sync's Job %s for a push", name, extra=said)
        else:
            LOG.info("the sync's Job %s exists: not started again", name, extra=said)
        return True

    # -- the watcher ------------------------------------------------------------------

    def _watch_loop(self) -> None:
        since = ""
        while not self.stopping.is_set():
            try:
                since = since or self._list()
                since = self.runs.watch_jobs(
                    self.namespace, since, self._observe, timeout=self.watch_timeout
                )
            except WatchExpired:
                since = ""
            except MxGitOpsError as exc:
                LOG.error("cannot follow the CronJob's Jobs: %s", exc, extra={"error": str(exc)})
                since = ""
                self.stopping.wait(self.retry_delay)

    def _list(self) -> str:
        with self.changed:
            mark = self.coalescer.tick()
        jobs, version = self.runs.list_jobs(self.namespace)
        mine = [j for j in jobs if controlled_by(j, self.cronjob)]
        with self.changed:
            self.coalescer.listed(
                {j["metadata"]["name"] for j in mine if not finished(j)},
                {j["metadata"]["name"] for j in mine},
                mark,
            )
            self.listed = True
            self.changed.notify_all()
        return version

    def _observe(self, kind: str, job: KubeObject) -> None:
        if not controlled_by(job, self.cronjob):
            return
        with self.changed:
            ended = kind == "DELETED" or finished(job)
            self.coalescer.observed(job["metadata"]["name"], ended=ended)
            self.changed.notify_all()
