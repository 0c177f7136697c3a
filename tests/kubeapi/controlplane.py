"""A simulated control plane that tests step explicitly: job controller and kubelet.

There are no background threads or timers: a test (or a script, over
``/_kubeapi/...``) says "run the job controller", "this pod is now Running",
"container mxnet exited 137 OOMKilled", "an hour has passed", and the
objects change exactly as the real components would change them, with watch
events and new resourceVersions.

* :meth:`ControlPlane.run_job_controller` is one sync of every Job, as
  ``pkg/controller/job`` does it: it creates missing pods from the template
  (generateName ``{job}-``, the four job labels, a controller ownerReference;
  none for suspended Jobs, never more than parallelism / remaining
  completions), counts active / ready / succeeded / failed pods, applies
  ``podFailurePolicy`` rules (FailJob / Ignore / Count on exit codes and pod
  conditions), ``backoffLimit`` (including container restarts under
  OnFailure), ``activeDeadlineSeconds`` against the simulated clock, and
  writes the conditions (SuccessCriteriaMet + Complete, FailureTarget +
  Failed with reasons PodFailurePolicy / BackoffLimitExceeded /
  DeadlineExceeded, Suspended) with startTime and completionTime.
* :meth:`ControlPlane.kubelet` moves pods through Pending, Running, Succeeded
  and Failed with container states; with restartPolicy OnFailure/Always a
  failure restarts the container in place (restartCount, lastState,
  CrashLoopBackOff).  Afterwards the owning Jobs' status is synced, but new
  pods only appear on the next job-controller step.

Not modelled: the job-tracking finalizer on pods (a failed pod counted stays
counted once deleted, as it makes it), Indexed jobs' per-index
accounting, pod backoff delays, ttlSecondsAfterFinished, scheduling.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from . import defaults, podstatus
from .resources import resource
from .rest import Rest

JOBS, PODS = resource("jobs"), resource("pods")
NODE = "kubeapi-node"
TERMINAL = podstatus.TERMINAL


def _owned_by(obj: dict[str, Any], uid: str) -> bool:
    return any(r.get("uid") == uid for r in obj["metadata"].get("ownerReferences") or [])


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), None)


def _finished(status: dict[str, Any]) -> bool:
    return any(
        c["type"] in ("Complete", "Failed") and c["status"] == "True"
        for c in status.get("conditions") or []
    )


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def policy_action(policy: dict[str, Any] | None, pod: dict[str, Any]) -> tuple[str, str] | None:
    """The first podFailurePolicy rule matching a failed pod: (action, message)."""
    meta, status = pod["metadata"], pod.get("status") or {}
    where = f"{meta['namespace']}/{meta['name']}"
    statuses = (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    for i, rule in enumerate((policy or {}).get("rules") or []):
        action = rule.get("action", "")
        codes = rule.get("onExitCodes")
        if codes:
            for cs in statuses:
                term = (cs.get("state") or {}).get("terminated")
                if not term or term.get("exitCode", 0) == 0:
                    continue
                if codes.get("containerName") not in (None, cs["name"]):
                    continue
                if (term["exitCode"] in codes.get("values", [])) == (codes.get("operator") == "In"):
                    return action, (
                        f"Container {cs['name']} for pod {where} failed with exit code "
                        f"{term['exitCode']} matching {action} rule at index {i}"
                    )
        for wanted in rule.get("onPodConditions") or []:
            for cond in status.get("conditions") or []:
                if cond["type"] == wanted["type"] and cond["status"] == wanted.get(
                    "status", "True"
                ):
                    return action, (
                        f"Pod {where} has condition {cond['type']} matching {action} rule at "
                        f"index {i}"
                    )
    return None


class ControlPlane:
    def __init__(self, rest: Rest) -> None:
        self.rest = rest
        self.store = rest.store
        # The failed pods each Job counted, by uid: the real controller keeps counting a
        # failed pod once deleted (its job-tracking finalizer), so `failed` never drops.
        self._counted: dict[str, set[str]] = {}

    def advance_clock(self, seconds: float) -> None:
        """Move the simulated clock (timestamps, activeDeadlineSeconds) forward."""
        with self.store.lock:
            self.store.clock_offset += timedelta(seconds=seconds)

    # -- job controller --------------------------------------------------------
    def run_job_controller(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """Sync every Job (of ``namespace``); returns the pods it created."""
        created: list[dict[str, Any]] = []
        with self.store.lock:
            for job in self.store.objects(JOBS, namespace):
                created.extend(self.sync_job(job, create_pods=True))
        return created

    def _pods_of(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        meta = job["metadata"]
        pods = [p for p in self.store.objects(PODS, meta["namespace"]) if _owned_by(p, meta["uid"])]
        return sorted(pods, key=lambda p: int(p["metadata"]["resourceVersion"]))

    def _new_pod(self, job: dict[str, Any]) -> dict[str, Any]:
        meta, template = job["metadata"], copy.deepcopy(job["spec"]["template"])
        pod_meta = template.get("metadata") or {}
        pod_meta.pop("creationTimestamp", None)
        labels = dict(pod_meta.get("labels") or {})
        labels.update(
            {
                defaults.CONTROLLER_UID: meta["uid"],
                defaults.JOB_NAME: meta["name"],
                defaults.LEGACY_CONTROLLER_UID: meta["uid"],
                defaults.LEGACY_JOB_NAME: meta["name"],
            }
        )
        pod_meta.update(
            {
                "generateName": f"{meta['name']}-",
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            }
        )
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template["spec"]}
        pod, _ = self.rest.create(PODS, meta["namespace"], body, "Ignore")
        return pod

    def _kill(self, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            if self.store.get(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"]):
                self.rest._delete(PODS, pod, "Background")

    def sync_job(self, job: dict[str, Any], create_pods: bool) -> list[dict[str, Any]]:
        """One reconciliation of ``job`` (the lock held); returns created pods."""
        status = copy.deepcopy(job.get("status") or {})
        if _finished(status) or job["metadata"].get("deletionTimestamp"):
            return []
        spec, now = job["spec"], self.store.timestamp()
        pods = self._pods_of(job)
        active = [
            p
            for p in pods
            if (p.get("status") or {}).get("phase") not in TERMINAL
            and not p["metadata"].get("deletionTimestamp")
        ]
        succeeded = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
        counted, failure = self._counted.setdefault(job["metadata"]["uid"], set()), None
        for pod in (p for p in pods if (p.get("status") or {}).get("phase") == "Failed"):
            matched = policy_action(spec.get("podFailurePolicy"), pod)
            if matched and matched[0] == "Ignore":
                continue
            counted.add(pod["metadata"]["uid"])
            if matched and matched[0] == "FailJob" and failure is None:
                failure = ("PodFailurePolicy", matched[1])
        created: list[dict[str, Any]] = []
        if spec.get("suspend"):
            self._kill(active)
            active = []
            self._set_condition(status, "Suspended", "JobSuspended", "Job suspended", now)
        else:
            suspended = _condition(status, "Suspended")
            if suspended and suspended["status"] == "True":
                self._set_condition(status, "Suspended", "JobResumed", "Job resumed", now, "False")
                status["startTime"] = now
            status.setdefault("startTime", now)
            backoff = spec.get("backoffLimit", 6)
            restarts = sum(
                cs.get("restartCount", 0)
                for p in active
                for cs in (p.get("status") or {}).get("containerStatuses") or []
            )
            on_failure = spec["template"]["spec"].get("restartPolicy") == "OnFailure"
            deadline = spec.get("activeDeadlineSeconds")
            if failure is None and (
                len(counted) > backoff
                or (on_failure and (restarts > 0 if backoff == 0 else restarts >= backoff))
            ):
                failure = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
            if (
                failure is None
                and deadline is not None
                and self.store.now() - _parse_time(status["startTime"])
                >= timedelta(seconds=deadline)
            ):
                failure = ("DeadlineExceeded", "Job was active longer than specified deadline")
            completions = spec.get("completions")
            complete = (
                len(succeeded) >= completions
                if completions is not None
                else bool(succeeded) and not active
            )
            if failure:
                counted.update(p["metadata"]["uid"] for p in active)
                self._kill(active)
                active = []
                self._set_condition(status, "FailureTarget", *failure, now)
                self._set_condition(status, "Failed", *failure, now)
            elif complete:
                self._kill(active)
                active = []
                message = "Reached expected number of succeeded pods"
                self._set_condition(
                    status, "SuccessCriteriaMet", "CompletionsReached", message, now
                )
                self._set_condition(status, "Complete", "CompletionsReached", message, now)
                status["completionTime"] = now
            elif create_pods:
                wanted = spec.get("parallelism", 1)
                if completions is not None:
                    wanted = min(wanted, completions - len(succeeded))
                elif succeeded:
                    wanted = 0
                for _ in range(wanted - len(active)):
                    pod = self._new_pod(job)
                    created.append(pod)
                    active.append(pod)
        for key, value in (
            ("active", len(active)),
            ("succeeded", len(succeeded)),
            ("failed", len(counted)),
        ):
            if value:
                status[key] = value
            else:
                status.pop(key, None)
        status["ready"] = sum(1 for p in active if _pod_ready(p))
        status["terminating"] = 0
        status["uncountedTerminatedPods"] = {}
        current = self.store.get(JOBS, job["metadata"]["namespace"], job["metadata"]["name"])
        if current is not None and current.get("status") != status:
            self.store.put(JOBS, {**copy.deepcopy(current), "status": status})
        return created

    @staticmethod
    def _set_condition(
        status: dict[str, Any], kind: str, reason: str, message: str, now: str, value: str = "True"
    ) -> None:
        conditions = status.setdefault("conditions", [])
        existing = _condition(status, kind)
        if existing and existing["status"] == value and existing.get("reason") == reason:
            return
        entry = {
            "type": kind,
            "status": value,
            "lastProbeTime": now,
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        }
        if existing:
            conditions[conditions.index(existing)] = entry
        else:
            conditions.append(entry)

    # -- kubelet ---------------------------------------------------------------
    def kubelet(
        self,
        pod: str | None = None,
        *,
        job: str | None = None,
        namespace: str = "default",
        phase: str = "Running",
        container: str | None = None,
        exit_code: int | None = None,
        reason: str | None = None,
        message: str | None = None,
        restart_state: str = "waiting",
    ) -> list[dict[str, Any]]:
        """Move a pod (or every unfinished pod of ``job``) to ``phase``.

        ``phase`` is Pending, Running, Succeeded or Failed.  For Failed,
        ``container`` (default: the first) terminates with ``exit_code``
        (default 1), ``reason`` (default Error; e.g. OOMKilled) and
        ``message``; under restartPolicy OnFailure/Always it restarts in place
        instead (``restart_state`` "waiting" = CrashLoopBackOff, or "running").
        Returns the updated pods.
        """
        if phase not in podstatus.PHASES:
            raise ValueError(f"unknown pod phase {phase!r}")
        with self.store.lock:
            if pod is not None:
                pods = [self.rest.get(PODS, namespace, pod)]
            elif job is not None:
                owner = self.rest.get(JOBS, namespace, job)
                pods = [
                    p
                    for p in self._pods_of(owner)
                    if (p.get("status") or {}).get("phase") not in TERMINAL
                ]
            else:
                raise ValueError("kubelet needs a pod name or a job name")
            updated = [
                self._run_pod(p, phase, container, exit_code, reason, message, restart_state)
                for p in pods
            ]
            owners = {
                ref["uid"]
                for p in updated
                for ref in p["metadata"].get("ownerReferences") or []
                if ref.get("kind") == "Job"
            }
            for candidate in self.store.objects(JOBS, namespace):
                if candidate["metadata"]["uid"] in owners:
                    self.sync_job(candidate, create_pods=False)
            return updated

    def kubelet_jobs(
        self, jobs: Sequence[str], *, namespace: str = "default", **step: Any
    ) -> list[dict[str, Any]]:
        """Move every unfinished pod of each Job in ``jobs`` as :meth:`kubelet` does one
        Job's (a hundred jobs failing after a node loss), in one step."""
        with self.store.lock:
            return [p for job in jobs for p in self.kubelet(job=job, namespace=namespace, **step)]

    def evict(
        self, pod: str, namespace: str, *, message: str, condition: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Take a pod away, as the kubelet under node pressure or the taint manager does,
        whatever its restartPolicy: every container killed (137), the pod Failed with
        reason Evicted and ``message``, and ``condition`` (a ``DisruptionTarget``, or
        none: a pod failed by its node) among its conditions; its Job synced."""
        with self.store.lock:
            new = copy.deepcopy(self.rest.get(PODS, namespace, pod))
            status, now = new.setdefault("status", {}), self.store.timestamp()
            for container in status.get("containerStatuses") or []:
                running = (container.get("state") or {}).get("running") or {}
                killed = {"exitCode": 137, "reason": "Error", "finishedAt": now}
                killed["startedAt"] = running.get("startedAt", now)
                container.update(state={"terminated": killed}, ready=False)
            status.update(phase="Failed", reason="Evicted", message=message)
            if condition is not None:
                status["conditions"] = [*(status.get("conditions") or []), condition]
            updated = self.store.put(PODS, new)
            for owner in new["metadata"].get("ownerReferences") or []:
                for candidate in self.store.objects(JOBS, namespace):
                    if candidate["metadata"]["uid"] == owner.get("uid"):
                        self.sync_job(candidate, create_pods=False)
            return copy.deepcopy(updated)

    def _run_pod(
        self,
        pod: dict[str, Any],
        phase: str,
        container: str | None,
        exit_code: int | None,
        reason: str | None,
        message: str | None,
        restart_state: str,
    ) -> dict[str, Any]:
        new = copy.deepcopy(pod)
        new["spec"].setdefault("nodeName", NODE)
        new["status"] = podstatus.next_status(
            new,
            podstatus.Step(phase, container, exit_code, reason, message, restart_state),
            now=self.store.timestamp(),
            container_id=lambda: f"containerd://{self.store.new_uid().replace('-', '')}",
            pod_ip=lambda: self.store.allocate_ip().replace("10.96.", "10.244.", 1),
        )
        return self.store.put(PODS, new)


def _pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
