"""What the double does when stepped, on the real control plane: its controllers act on
their own, the fake kubelet moves pods as a test says, and each step then waits until
what it asked for has happened (every Job's pods exist, the job controller has counted
every finished pod), reading the API with a deadline, never sleeping a fixed time.

``ControllerSteps`` is a part of ``harness.RealCluster``, kept apart to be read alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tests.kubeapi import podstatus

from .kubelet import FakeKubelet
from .rest import Rest

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
WAIT_TIMEOUT = 60.0
T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = WAIT_TIMEOUT) -> T:
    """Poll ``probe`` until it returns something other than None or False."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"real control plane: gave up after {timeout:.0f} s waiting {what}")
        time.sleep(0.05)  # the controllers act on their own: poll what they wrote


def _condition(obj: dict[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def _finished(job: dict[str, Any]) -> bool:
    return _condition(job, "Complete") or _condition(job, "Failed")


def _restarts(pod: dict[str, Any]) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return sum(int(c.get("restartCount", 0)) for c in statuses)


def _phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase", "Pending"))


class ControllerSteps:
    """The job controller's, the scheduler's and the kubelet's steps of the harness."""

    rest: Rest
    node: FakeKubelet | None
    _handed_out: set[str]  # pods run_job_controller returned already
    objects: Callable[..., list[dict[str, Any]]]
    get: Callable[..., dict[str, Any] | None]
    _not_kept: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]

    def _jobs_and_pods(
        self, namespace: str | None, pods: list[dict[str, Any]] | None = None
    ) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """Every Job in ``namespace`` (none kept) with the pods it owns (of ``pods``, if
        listed already)."""
        owned: dict[str, list[dict[str, Any]]] = {}
        for pod in self.objects("pods", namespace) if pods is None else pods:
            for ref in pod["metadata"].get("ownerReferences") or []:
                owned.setdefault(ref.get("uid", ""), []).append(pod)
        jobs = self._not_kept(self.objects("jobs", namespace))
        return [(job, owned.get(job["metadata"]["uid"], [])) for job in jobs]

    def run_job_controller(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """Wait until every running Job in ``namespace`` has its pods; return those not
        returned before in this test (the double returns the pods its step created)."""

        def pods_of_running_jobs() -> list[dict[str, Any]] | None:
            found: list[dict[str, Any]] = []
            for job, pods in self._jobs_and_pods(namespace):
                if _finished(job) or job["spec"].get("suspend"):
                    continue
                running = [p for p in pods if _phase(p) not in podstatus.TERMINAL]
                if len(running) < job["spec"].get("parallelism", 1):
                    return None
                found += running
            return found

        wait_for("for the job controller to create pods", pods_of_running_jobs)
        self.settle(namespace)
        pods = pods_of_running_jobs() or []
        new = [p for p in pods if p["metadata"]["uid"] not in self._handed_out]
        self._handed_out.update(p["metadata"]["uid"] for p in new)
        return new

    def kubelet(
        self,
        pod: str | None = None,
        *,
        job: str | None = None,
        namespace: str = "default",
        **step: Any,
    ) -> list[dict[str, Any]]:
        """Move a pod (or every unfinished pod of ``job``) as :class:`podstatus.Step`
        says, once the scheduler has bound it; then wait for the job controller."""
        move = podstatus.Step(**step)
        if pod is not None:
            pods = [self.rest.get(f"/api/v1/namespaces/{namespace}/pods/{pod}")]
        elif job is not None:
            owner = self.get("Job", job, namespace)
            if owner is None:
                raise ValueError(f"no Job {namespace}/{job}")
            pods = next(
                p
                for j, p in self._jobs_and_pods(namespace)
                if j["metadata"]["uid"] == owner["metadata"]["uid"]
            )
            pods = [p for p in pods if _phase(p) not in podstatus.TERMINAL]
        else:
            raise ValueError("kubelet needs a pod name or a job name")
        node = self._fake_node()
        updated = [node.step(self._bound(p), move) for p in pods]
        self.settle(namespace)
        return updated

    def kubelet_jobs(
        self, jobs: Sequence[str], *, namespace: str = "default", **step: Any
    ) -> list[dict[str, Any]]:
        """Move every unfinished pod of each Job in ``jobs`` as :meth:`kubelet` does one
        Job's, all at once: the pods listed once bound, their statuses written a few at
        a time, then one wait for the job controller (one :meth:`kubelet` per Job would
        wait out its batch period once per Job)."""
        move = podstatus.Step(**step)
        node = self._fake_node()
        wanted = set(jobs)

        def bound_pods() -> list[dict[str, Any]] | None:
            listed = [
                (j, p) for j, p in self._jobs_and_pods(namespace) if j["metadata"]["name"] in wanted
            ]
            missing = wanted - {j["metadata"]["name"] for j, _ in listed}
            if missing:
                raise ValueError(f"no Job {namespace}/{sorted(missing)[0]}")
            pods = [p for _, owned in listed for p in owned if _phase(p) not in podstatus.TERMINAL]
            return pods if all(p["spec"].get("nodeName") for p in pods) else None

        pods = wait_for(f"for the scheduler to bind the pods of {len(wanted)} Jobs", bound_pods)
        updated = node.step_all(pods, move)
        self.settle(namespace)
        return updated

    def container_log(self, *, job: str, namespace: str, text: str) -> None:
        """What every pod of the batch Job ``job`` serves as its log, through the real
        API server's ``pods/{name}/log``, which proxies it from the fake kubelet."""
        self._fake_node().logs.texts[(namespace, job)] = text

    def _fake_node(self) -> FakeKubelet:
        if self.node is None:
            raise RuntimeError("this cluster's node is real: its containers decide how pods end")
        return self.node

    def _bound(self, pod: dict[str, Any]) -> dict[str, Any]:
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"

        def bound() -> dict[str, Any] | None:
            current: dict[str, Any] = self.rest.get(path)
            return current if current["spec"].get("nodeName") else None

        return wait_for(f"for the scheduler to bind {meta['name']}", bound)

    def settle(self, namespace: str | None = None) -> None:
        """Wait until the controllers have caught up, as they have between two syncs of
        a CronJob minutes apart: the job controller has counted every finished pod and
        decided, and the garbage collector has removed the pods of deleted Jobs (in
        ``namespace``, or in every namespace not kept)."""

        def job_settled(job: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
            status = job.get("status") or {}
            if status.get("uncountedTerminatedPods"):
                return False
            if _condition(job, "FailureTarget") and not _condition(job, "Failed"):
                return False
            if _condition(job, "SuccessCriteriaMet") and not _condition(job, "Complete"):
                return False
            if any(
                _phase(p) in podstatus.TERMINAL
                and TRACKING_FINALIZER in (p["metadata"].get("finalizers") or [])
                for p in pods
            ):
                return False
            if _finished(job):
                return True
            # spec.suspend is reflected in the Suspended condition: True while suspended,
            # False once resumed, absent on a Job never suspended
            shown = next(
                (c["status"] for c in status.get("conditions") or [] if c["type"] == "Suspended"),
                None,
            )
            if job["spec"].get("suspend") and shown != "True":
                return False
            if not job["spec"].get("suspend") and shown == "True":
                return False
            # The job controller counts ready pods a second after they change (its batch
            # period), and mxgitops never reads that count: it is waited for only where
            # the controller may act on the same update (a restart in place counts
            # against the backoff limit).
            if not any(_restarts(p) for p in pods):
                return True
            ready = sum(1 for p in pods if _condition(p, "Ready"))
            return bool(status.get("ready", 0) == ready)

        def settled() -> bool:
            pods = self._not_kept(self.objects("pods", namespace))
            jobs = self._jobs_and_pods(namespace, pods)
            if any(job["metadata"].get("deletionTimestamp") for job, _ in jobs):
                return False  # foreground deletion under way
            owners = {job["metadata"]["uid"] for job, _ in jobs}
            for pod in pods:
                refs = pod["metadata"].get("ownerReferences") or []
                if pod["metadata"].get("deletionTimestamp"):
                    return False
                if any(r.get("kind") == "Job" and r.get("uid") not in owners for r in refs):
                    return False
            return all(job_settled(j, p) for j, p in jobs)

        wait_for("for the job controller and the garbage collector", settled)
