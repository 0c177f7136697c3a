"""The receiver's link to the cluster: a verified push starts a Job from the CronJob,
at once or when the sync that runs has ended (`coalesce.py` decides which).

Two threads. The watcher lists the CronJob's namespace's Jobs once, then watches
them, and tells the coalescer which of the CronJob's runs are unfinished; a watch
that expires lists again. A watch that fails, or that the server ends at once (even
with a 200), is tried again after a backoff, exponential with jitter and capped
(`Backoff`): an API server that ends every watch at once gets at most two a second,
then one a minute. A Job the LIST or a watch brings ill-typed (`livecheck`) is logged
and skipped. The starter waits until a push waits and no sync runs, then reads the
CronJob (its template as it is now, like kubectl) and creates the Job. A create that
fails is logged and tried again after `retry_delay`; the push waits meanwhile. No push
starts anything before the first LIST: until then the receiver cannot know whether a
sync runs (`/healthz` says 503, as it does once either thread has stopped).

A suspended CronJob (`spec.suspend`) is how an operator stops the reconciler: a push
is then answered so and starts nothing, and a push that waited is dropped when its
turn comes (the CronJob is read again right before each create). Once resumed, the
schedule syncs the branch's tip; pushes start syncs again.

Only this module's `SyncStarter` holds the lock around the coalescer; the requests to
the cluster are made outside it, so a slow API server never holds up another answer.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from mxgitops.errors import MxGitOpsError
from mxgitops.kube.cronjobs import WatchExpired
from mxgitops.objects import Kind, KubeObject
from mxgitops.outputs.metrics import ReceiverCounters
from mxgitops.receiver.coalesce import Coalescer, Decision
from mxgitops.receiver.manualjob import (
    controlled_by,
    finished,
    job_from_cronjob,
    push_job_name,
    suspended,
)
from mxgitops.receiver.webhook import Push
from mxgitops.runtimes.shared import livecheck

LOG = logging.getLogger("mxgitops.receiver.server")
RETRY_DELAY = 5.0  # seconds before a failed create is tried again
WATCH_TIMEOUT = 300  # seconds of one watch request; then it watches again from where it was
WATCH_BACKOFF_FIRST = 1.0  # seconds before the watch is tried again after one failure
WATCH_BACKOFF_CAP = 60.0  # seconds at most between two watches that fail
QUICK_WATCH = 1.0  # a watch ended sooner (or in half its timeout, if shorter) failed
PUSH_READ_BUDGET = 5.0  # seconds a push's answer waits for the CronJob (forges wait 10)
WATCHER = "watcher of the CronJob's Jobs"
_NAME_SHOWN = 253  # characters of a Job's name in a log line (a name's limit)


class CronJobRuns(Protocol):
    """What the starter asks of the cluster (`kubecronjobs.CronJobRuns`)."""

    def cronjob(self, namespace: str, name: str, *, budget: float | None = None) -> KubeObject: ...

    def create_job(self, job: KubeObject) -> bool: ...

    def list_jobs(self, namespace: str) -> tuple[list[KubeObject], str]: ...

    def watch_jobs(self, namespace: str, since: str, on_event: OnEvent, *, timeout: int) -> str: ...


class OnEvent(Protocol):
    def __call__(self, kind: str, job: KubeObject, /) -> None: ...


class Backoff:
    """The delay before the next try: doubled at each failure from `first` up to `cap`,
    less a random part of up to half (`jitter()` in [0, 1)), so that receivers that
    failed together do not try again together. A success starts it over."""

    def __init__(
        self,
        first: float = WATCH_BACKOFF_FIRST,
        cap: float = WATCH_BACKOFF_CAP,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.first, self.cap, self.jitter = first, cap, jitter
        self.failures = 0

    def failed(self) -> float:
        delay: float = min(self.cap, self.first * float(2 ** min(self.failures, 32)))
        self.failures += 1
        return delay * (1 - self.jitter() / 2)

    def succeeded(self) -> None:
        self.failures = 0


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
        clock: Callable[[], float] = time.monotonic,
        pause: Callable[[float], object] | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.runs, self.namespace, self.cronjob = runs, namespace, cronjob
        self.counters = counters
        self.retry_delay, self.watch_timeout = retry_delay, watch_timeout
        self.coalescer = Coalescer()
        self.changed = threading.Condition()
        self.listed = False  # the first LIST came back: what runs is known
        self.stopping = threading.Event()
        self.clock = clock
        # Waits between the watcher's tries; returns early (truthy) once stopping.
        self.pause = pause or self.stopping.wait
        self.backoff = Backoff(jitter=jitter)
        self._threads = {
            part: threading.Thread(target=self._run, args=(loop, part), name=name, daemon=True)
            for part, loop, name in (
                ("starter", self.start_loop, "mxgitops-starter"),
                (WATCHER, self.watch, "mxgitops-watcher"),
            )
        }

    def start(self) -> None:
        for thread in self._threads.values():
            thread.start()

    def stop(self) -> None:
        self.stopping.set()
        with self.changed:
            self.changed.notify_all()

    def push(self, push: Push) -> Decision:
        if self._suspended():
            return Decision.SUSPENDED
        with self.changed:
            decision = self.coalescer.push(push)
            self.changed.notify_all()
        return decision

    def unready(self) -> str:
        """Why pushes cannot be served ("" when they can): the Jobs not listed yet, or
        a thread stopped (what runs, or starting a sync, is then out of reach)."""
        with self.changed:
            if not self.listed:
                return "the Jobs are not listed yet"
        return self.stopped()

    def stopped(self) -> str:
        """Which thread stopped unexpectedly ("" while every one runs): only a restart
        brings it back, so the liveness probe asks this, not `unready` (a LIST the API
        server has not answered yet is waited for, not restarted)."""
        for part, thread in self._threads.items():
            if thread.ident is not None and not thread.is_alive() and not self.stopping.is_set():
                return f"the {part} stopped: restart the receiver"
        return ""

    def ready(self) -> bool:
        return not self.unready()

    def _run(self, loop: Callable[[], None], part: str) -> None:
        """A thread's loop; what stops it unexpectedly is one log line (then `unready`
        says so), not a traceback on stderr."""
        try:
            loop()
        except Exception as exc:  # a bug: the thread ends, /healthz fails
            LOG.critical("the %s stopped: %s", part, exc, exc_info=True)

    def _suspended(self) -> bool:
        """Whether the CronJob is suspended, as read now; a read that fails is logged and
        taken for no (the read before the create decides). A push's answer waits for
        this read, so it gets `PUSH_READ_BUDGET`, not the whole request timeout."""
        try:
            cronjob = self.runs.cronjob(self.namespace, self.cronjob, budget=PUSH_READ_BUDGET)
            return suspended(cronjob)
        except MxGitOpsError as exc:
            LOG.warning("cannot read the CronJob: %s", exc, extra={"error": str(exc)})
            return False

    # -- the starter ------------------------------------------------------------------

    def start_loop(self) -> None:
        """The starter: a Job for the push that waits, once no sync runs."""
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
            if suspended(cronjob):
                LOG.info("the CronJob is suspended: no sync started for a push", extra=said)
                with self.changed:
                    self.coalescer.withdrawn(name)
                    self.changed.notify_all()
                return True
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

    def watch(self) -> None:
        """The watcher: a LIST, then watches from its version, until stopped."""
        since = ""
        while not self.stopping.is_set():
            began = self.clock()
            failed = True
            try:
                since = since or self._list()
                since = self.runs.watch_jobs(
                    self.namespace, since, self._observe, timeout=self.watch_timeout
                )
                failed = self._quick(began, "ended")
            except WatchExpired:
                since = ""
                failed = self._quick(began, "expired")
            except MxGitOpsError as exc:
                LOG.error("cannot follow the CronJob's Jobs: %s", exc, extra={"error": str(exc)})
                since = ""
            if failed:
                self.pause(self.backoff.failed())
            else:
                self.backoff.succeeded()

    def _quick(self, began: float, how: str) -> bool:
        """Whether the watch begun at `began` ended too soon to count as a success."""
        lasted = self.clock() - began
        if lasted >= min(QUICK_WATCH, self.watch_timeout / 2):
            return False
        LOG.warning(
            "the watch of the CronJob's Jobs %s after %.2f s: watching again after a backoff",
            how,
            lasted,
        )
        return True

    def _list(self) -> str:
        with self.changed:
            mark = self.coalescer.tick()
        jobs, version = self.runs.list_jobs(self.namespace)
        mine = [j for j in jobs if self._well_typed(j, "LIST") and controlled_by(j, self.cronjob)]
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
        if not self._well_typed(job, "watch") or not controlled_by(job, self.cronjob):
            return
        with self.changed:
            ended = kind == "DELETED" or finished(job)
            self.coalescer.observed(job["metadata"]["name"], ended=ended)
            self.changed.notify_all()

    @staticmethod
    def _well_typed(job: Any, source: str) -> bool:
        """Whether `job` reads as a Job (what `livecheck` checks); one that does not is
        logged and skipped: an API server gone wrong stops no more than that Job."""
        problem = livecheck.object_problem(Kind.JOB, job)
        if problem:
            name = livecheck.name_of(job)[:_NAME_SHOWN]
            LOG.warning(
                "a Job the %s brought is skipped (%r): its %s",
                source,
                name,
                problem,
                extra={"job": name, "problem": problem},
            )
        return not problem
