"""A CronJob's runs as the real CronJob controller starts them, for a test that
installs the CronJob and checks its runs minutes later (``tests/node/test_cronjob.py``).

- ``period_of``/``first_due``: the due times of a ``*/N`` schedule.
- ``RunRecorder``: keeps each of the first runs as it finishes (its Job, pod and
  ``kubectl logs``), from a thread. A CronJob keeps only a few finished Jobs
  (``successfulJobsHistoryLimit``), and their pods and logs go with them: a test
  that looks at the end of a long session would find the first runs gone.
- ``scheduled_run``: waits for the run due ``index`` periods after the first, as
  long as the controller may still start it (``startingDeadlineSeconds`` after its
  time; later, it skips it) and then as long as a run takes; fails naming the run
  that did not come or did not end.
- ``requests_of``: a run's requests in the audit log, by the pod its projected
  service-account token is bound to.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.rest import Rest

# The pod a projected service-account token is bound to, in each audit event's user.
POD_NAME = "authentication.kubernetes.io/pod-name"
SCHEDULED = "batch.kubernetes.io/cronjob-scheduled-timestamp"  # on each Job it starts
POLL = 1.0  # how often the recorder looks for runs that finished
ORDINALS = ("first", "second", "third")


def kubectl(kubeconfig: Path, *args: str) -> str:
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def period_of(schedule: str) -> timedelta:
    """The period of a ``*/N * * * *`` schedule (N dividing 60): its runs are due at
    the multiples of N minutes."""
    every = re.fullmatch(r"\*/(\d+) \* \* \* \*", schedule)
    if every is None or 60 % int(every[1]):
        raise ValueError(f"cronjob: the test knows the due times of */N schedules only: {schedule}")
    return timedelta(minutes=int(every[1]))


def first_due(created: datetime, period: timedelta) -> datetime:
    """The first due time after ``created``: the controller schedules nothing at or
    before a CronJob's creation."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + ((created - epoch) // period + 1) * period


def timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text)  # RFC 3339 with Z: Python 3.11 reads it


def ended(job: dict[str, Any]) -> str | None:
    """``Complete`` or ``Failed`` once the job controller has decided, else None."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition["type"] in ("Complete", "Failed") and condition["status"] == "True":
            return str(condition["type"])
    return None


@dataclass(frozen=True)
class Run:
    """One finished run of the CronJob, as it was when it finished."""

    job: dict[str, Any]
    pods: list[dict[str, Any]]
    log: str  # kubectl logs job/<name>

    @property
    def name(self) -> str:
        return str(self.job["metadata"]["name"])


class RunRecorder:
    """Keeps the first ``count`` runs (by scheduled time) of the CronJob ``cronjob`` as
    each finishes, from a thread that polls the API with a client of its own; and the
    scheduled time of every run started, to tell a run that did not come from one
    that has not ended."""

    def __init__(
        self, cluster: RealCluster, kubeconfig: Path, namespace: str, cronjob: str, count: int
    ) -> None:
        plane = cluster.plane
        assert plane.pki is not None and plane.admin is not None
        self._rest = Rest(plane.url, plane.pki.ca, plane.admin.cert, plane.admin.key)
        self._kubeconfig = kubeconfig
        self._namespace, self._cronjob, self._count = namespace, cronjob, count
        self._lock = threading.Lock()
        self._started: dict[str, datetime] = {}  # Job name -> the time it was scheduled for
        self._seen: dict[str, dict[str, Any]] = {}  # Job name -> the Job as last polled
        self._finished: dict[str, Run] = {}
        self.error = ""  # why the last poll failed, for a timeout's message
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._poll_until_done, name="cronjob-runs", daemon=True
        )

    def __enter__(self) -> RunRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=90)  # a poll's requests time out within 60 s

    def started(self) -> dict[str, datetime]:
        with self._lock:
            return dict(self._started)

    def seen(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._seen.get(name)

    def finished(self, name: str) -> Run | None:
        with self._lock:
            return self._finished.get(name)

    def _poll_until_done(self) -> None:
        while not self._stop.is_set() and len(self._finished) < self._count:
            try:
                self._poll()
                self.error = ""
            except Exception as err:  # raised in this thread, it would be lost: the test says it
                self.error = f"the recorder's last poll failed: {type(err).__name__}: {err}"
            self._stop.wait(POLL)

    def _poll(self) -> None:
        jobs = self._rest.get(f"/apis/batch/v1/namespaces/{self._namespace}/jobs")["items"]
        ours = [
            job
            for job in jobs
            if any(
                (ref["kind"], ref["name"]) == ("CronJob", self._cronjob)
                for ref in job["metadata"].get("ownerReferences") or []
            )
        ]
        with self._lock:
            for job in ours:
                name = job["metadata"]["name"]
                self._started.setdefault(name, timestamp(job["metadata"]["annotations"][SCHEDULED]))
                self._seen[name] = job
            first = sorted(self._started, key=self._started.__getitem__)[: self._count]
        for job in ours:
            name = job["metadata"]["name"]
            if name in first and name not in self._finished and ended(job):
                run = self._keep(job)
                with self._lock:
                    self._finished[name] = run

    def _keep(self, job: dict[str, Any]) -> Run:
        name = job["metadata"]["name"]
        pods = self._rest.get(
            f"/api/v1/namespaces/{self._namespace}/pods", labelSelector=f"job-name={name}"
        )["items"]
        log = kubectl(self._kubeconfig, "logs", "-n", self._namespace, f"job/{name}")
        return Run(job=job, pods=pods, log=log)


def scheduled_run(
    recorder: RunRecorder,
    cronjob: Callable[[], dict[str, Any]],
    index: int,
    run_timeout: float,
) -> Run:
    """The run due ``index`` periods after the first, once it ended (``cronjob`` reads
    the live CronJob): see the module docstring."""
    live = cronjob()
    spec = live["spec"]
    period = period_of(spec["schedule"])
    due = first_due(timestamp(live["metadata"]["creationTimestamp"]), period) + index * period
    starting = spec["startingDeadlineSeconds"]
    given_up = due + timedelta(seconds=starting + POLL + 5)
    which = f"the {ORDINALS[index]} scheduled run (due {due:%H:%M:%S} UTC)"

    def came() -> str | None:
        started = recorder.started()
        mine = [name for name, at in started.items() if at == due]
        later = sorted(at for at in started.values() if at > due)
        if not mine and later:
            pytest.fail(
                f"{which} did not come: the controller skipped it (startingDeadlineSeconds "
                f"{starting} passed) and started the one due {later[0]:%H:%M:%S} UTC"
            )
        return mine[0] if mine else None

    try:
        name = wait_for(which, came, timeout=_until(given_up))
    except TimeoutError:
        pytest.fail(
            f"{which} did not come by {given_up:%H:%M:%S} UTC, startingDeadlineSeconds "
            f"{starting} after its time: CronJob status {cronjob().get('status')}; "
            f"{recorder.error}"
        )
    ends_by = given_up + timedelta(seconds=run_timeout)
    try:
        return wait_for(f"{which} to end", lambda: recorder.finished(name), _until(ends_by))
    except TimeoutError:
        pytest.fail(
            f"{which}, Job {name}, did not end by {ends_by:%H:%M:%S} UTC: "
            f"{(recorder.seen(name) or {}).get('status')}; {recorder.error}"
        )


def _until(deadline: datetime) -> float:
    return max(0.0, (deadline - datetime.now(UTC)).total_seconds())


def requests_of(audit_log: Path, offset: int, account: str, pod: str) -> list[dict[str, Any]]:
    """What the pod ``pod`` asked the API server, from the audit log since ``offset``.
    A service account's request carries the pod its projected token is bound to:
    every request of ``account`` must, so that each is attributed to exactly one run."""
    mine = []
    with audit_log.open("rb") as log:
        log.seek(offset)
        for line in log:
            if not line.endswith(b"\n"):
                break  # the API server is writing this one
            if account.encode() not in line and pod.encode() not in line:
                continue
            event = json.loads(line)
            user = event["user"]
            pods = (user.get("extra") or {}).get(POD_NAME)
            if user["username"] == account:
                assert pods, f"a request of {account} names no pod: {event}"
            if pods != [pod] or event["stage"] != "ResponseComplete":
                continue
            mine.append(
                {
                    "verb": event["verb"],
                    "path": event["requestURI"].partition("?")[0],
                    "status": (event.get("responseStatus") or {}).get("code", 0),
                    "user": user["username"],
                }
            )
    assert mine, f"the audit log has no request of the run's pod {pod}"
    return mine
