"""What a kubelet writes into a pod's status when its containers start, finish or fail.

Pure: one function from (pod, step) to the next ``status``. The double's simulated
kubelet and the fake kubelet that drives pods on the real control plane
(``tests/controlplane/kubelet.py``) both use it, so a test says the same thing
("container mxnet exited 137 OOMKilled") to either backend and the pod reads
the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PHASES = ("Pending", "Running", "Succeeded", "Failed")
TERMINAL = ("Succeeded", "Failed")
HOST_IP = "10.0.0.1"


@dataclass(frozen=True)
class Step:
    """Move a pod to ``phase``. For Failed, ``container`` (default: the first) terminates
    with ``exit_code`` (default 1), ``reason`` (default Error) and ``message``; under
    restartPolicy OnFailure/Always it restarts in place instead (``restart_state``
    "waiting" = CrashLoopBackOff, or "running")."""

    phase: str = "Running"
    container: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    restart_state: str = "waiting"
    # When the containers that stop finished (RFC 3339; default: now). The real kubelet
    # writes whole seconds: a test that needs one finish before another says so.
    finished_at: str | None = None

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"unknown pod phase {self.phase!r}")


def _terminated(step: Step, failed: bool, started: str, now: str, cid: str) -> dict[str, Any]:
    code = (step.exit_code if step.exit_code is not None else 1) if failed else 0
    terminated: dict[str, Any] = {
        "exitCode": code,
        "reason": (step.reason or "Error") if failed else "Completed",
        "startedAt": started,
        "finishedAt": step.finished_at or now,
        "containerID": cid,
    }
    if failed and step.message:
        terminated["message"] = step.message
    return terminated


def _crash_loop(container: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "waiting": {
            "reason": "CrashLoopBackOff",
            "message": f"back-off 10s restarting failed container={container} "
            f"pod={meta['name']}_{meta['namespace']}({meta['uid']})",
        }
    }


def _conditions(phase: str, status_phase: str, ready: bool, now: str) -> list[dict[str, Any]]:
    flag = "True" if ready else "False"
    conditions: list[dict[str, Any]] = [
        {"type": "PodReadyToStartContainers", "status": "False" if phase == "Pending" else "True"},
        {"type": "Initialized", "status": "True"},
        {"type": "Ready", "status": flag},
        {"type": "ContainersReady", "status": flag},
        {"type": "PodScheduled", "status": "True"},
    ]
    for cond in conditions:
        cond.update(lastProbeTime=None, lastTransitionTime=now)
    if not ready and status_phase != "Pending":
        for cond in conditions[2:4]:
            cond["reason"] = "PodCompleted" if phase in TERMINAL else "ContainersNotReady"
    return conditions


def next_status(
    pod: dict[str, Any],
    step: Step,
    *,
    now: str,
    container_id: Callable[[], str],
    pod_ip: Callable[[], str],
) -> dict[str, Any]:
    """The pod's status after ``step``, as its kubelet would report it at ``now``."""
    spec, meta = pod["spec"], pod["metadata"]
    status = dict(pod.get("status") or {})
    status.setdefault("startTime", now)
    status.setdefault("hostIP", HOST_IP)
    status.setdefault("hostIPs", [{"ip": HOST_IP}])
    if "podIP" not in status:
        ip = pod_ip()
        status["podIP"], status["podIPs"] = ip, [{"ip": ip}]
    names = [c["name"] for c in spec["containers"]]
    target = step.container or names[0]
    if target not in names:
        raise ValueError(f"pod {meta['name']} has no container {target!r}")
    previous = {cs["name"]: cs for cs in status.get("containerStatuses") or []}
    restarts_in_place = step.phase == "Failed" and spec.get("restartPolicy") != "Never"
    statuses = []
    for c in spec["containers"]:
        before = previous.get(c["name"], {})
        cs: dict[str, Any] = {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": "",
            "containerID": container_id(),
            "restartCount": before.get("restartCount", 0),
            "lastState": before.get("lastState", {}),
            "started": False,
            "ready": False,
        }
        started = (before.get("state") or {}).get("running", {}).get("startedAt", now)
        if step.phase == "Pending":
            cs["state"] = {"waiting": {"reason": "ContainerCreating"}}
        elif step.phase == "Running" or (restarts_in_place and c["name"] != target):
            cs.update(started=True, ready=True, state={"running": {"startedAt": started}})
        else:
            failed = step.phase == "Failed" and c["name"] == target
            terminated = _terminated(step, failed, started, now, cs["containerID"])
            if not restarts_in_place:
                cs["state"] = {"terminated": terminated}
            else:
                cs["restartCount"] += 1
                cs["lastState"] = {"terminated": terminated}
                if step.restart_state == "running":
                    cs.update(started=True, ready=True, state={"running": {"startedAt": now}})
                else:
                    cs["state"] = _crash_loop(c["name"], meta)
        statuses.append(cs)
    status["containerStatuses"] = statuses
    status["phase"] = "Running" if restarts_in_place else step.phase
    ready = all(cs["ready"] for cs in statuses) and status["phase"] == "Running"
    own = _conditions(step.phase, status["phase"], ready, now)
    # Conditions others set (the API server's DisruptionTarget on an eviction) stay.
    kinds = {c["type"] for c in own}
    others = [c for c in status.get("conditions") or [] if c.get("type") not in kinds]
    status["conditions"] = own + others
    return status
