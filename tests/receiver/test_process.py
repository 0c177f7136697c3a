"""`mxgitops receive` as its own process against the real control plane, as the
ServiceAccount of cronjob/components/receiver with exactly its Role: a signed push
starts the Job the real kubectl would make from the real CronJob; pushes during a sync
start one more when the real job controller completes it; a replay starts nothing.
Then each granted verb is taken away in turn (as tests/deploy/test_rbac.py does for the
sync): the round must fail on it with a "forbidden" line naming the resource, so no verb
is granted that the receiver does not use.

The CronJob is installed with a schedule half a year away: its controller starts no
scheduled run meanwhile, and every Job in the namespace is one a push started. Suspended,
it gets none from pushes either: the receiver honours `spec.suspend`.
"""

from __future__ import annotations

import copy
import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mxgitops.receiver.manualjob import PUSH_ANNOTATION, job_from_cronjob
from tests.controlplane.harness import RealCluster, wait_for
from tests.forges.webhooks import SECRET, ReceiverProcess, get, post, push_body, rarely, signed
from tests.helpers.cronjob import COLLECTIONS, Docs, account_kubeconfig, kustomize
from tests.helpers.cronjob import CRONJOB as CRONJOB_DIR
from tests.helpers.cronjobruns import kubectl
from tests.helpers.policy import role_path, without

NS = "mxgitops-example"
CRONJOB = "mxgitops-example"
ACCOUNT = "mxgitops-receiver-example"
USER = f"system:serviceaccount:{NS}:{ACCOUNT}"
SUSPENDED = "the CronJob is suspended: nothing starts; its schedule syncs again once it is resumed"
ROUND_TIMEOUT = 15.0  # seconds a round's step may take before the round counts as failed


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Docs:
    copy = tmp_path_factory.mktemp("receiver-real") / "cronjob"
    shutil.copytree(CRONJOB_DIR, copy)
    overlay = copy / "overlays/example/kustomization.yaml"
    overlay.write_text(overlay.read_text() + "components:\n  - ../../components/receiver\n")
    return kustomize(overlay.parent)


def without_claim(cronjob: dict[str, Any]) -> dict[str, Any]:
    """The example overlay's Git cache is a claim no volume here binds: its pods would
    never be scheduled. The base's emptyDir instead."""
    cronjob = copy.deepcopy(cronjob)
    volumes = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"]
    for volume in volumes:
        if volume["name"] == "cache":
            volume.pop("persistentVolumeClaim")
            volume["emptyDir"] = {}
    return cronjob


@dataclass
class Installed:
    real: RealCluster
    role: dict[str, Any]
    kubeconfig: Path  # the receiver's ServiceAccount's
    secret_file: Path
    directory: Path

    def push_jobs(self) -> list[dict[str, Any]]:
        return [
            j
            for j in self.real.objects("jobs", NS)
            if j["metadata"]["name"].startswith(f"{CRONJOB}-push-")
        ]

    def clear_jobs(self) -> None:
        self.real.raw(
            "DELETE", f"/apis/batch/v1/namespaces/{NS}/jobs", {"propagationPolicy": "Background"}
        )
        wait_for("the Jobs gone", lambda: not self.real.objects("jobs", NS))


@pytest.fixture
def installed(control_plane: RealCluster, rendered: Docs, tmp_path: Path) -> Iterator[Installed]:
    """The CronJob (its schedule half a year away), both ServiceAccounts and the
    receiver's Role, as an admin would create them from the overlay with the component."""
    real = control_plane
    real.wipe()
    real.clear_log()
    real.ensure_namespace(NS)
    made = []
    for doc in rendered:
        kind = doc["kind"]
        if kind in ("ServiceAccount", "Role", "RoleBinding") or kind == "CronJob":
            if kind == "CronJob":
                doc = without_claim({**doc, "spec": {**doc["spec"], "schedule": rarely()}})
                path = f"/apis/batch/v1/namespaces/{NS}/cronjobs"
            else:
                path = COLLECTIONS[kind].format(ns=NS)
            status, _, body = real.raw("POST", path, doc)
            assert status in (201, 409), body
            made.append(f"{path}/{doc['metadata']['name']}")
    (role,) = [d for d in rendered if d["kind"] == "Role" and d["metadata"]["name"] == ACCOUNT]
    secret_file = tmp_path / "secret"
    secret_file.write_bytes(SECRET + b"\n")
    kubeconfig = account_kubeconfig(real, NS, ACCOUNT, tmp_path / "receiver.kubeconfig")
    installation = Installed(real, role, kubeconfig, secret_file, tmp_path)
    try:
        yield installation
    finally:
        installation.clear_jobs()
        for path in reversed(made):
            real.raw("DELETE", path)
        real.wipe()


def receiver_of(installed: Installed, name: str) -> ReceiverProcess:
    return ReceiverProcess(
        installed.directory / f"{name}.log",
        cronjob=f"{NS}/{CRONJOB}",
        kubeconfig=installed.kubeconfig,
        secret_file=installed.secret_file,
    )


def push(receiver: ReceiverProcess, n: int) -> tuple[int, str]:
    assert receiver.address is not None
    body = push_body(commit=f"{n:040d}")
    return post(receiver.address, body, signed("github", body, delivery=f"delivery-{n}"))


def pruned(value: Any) -> Any:
    """Without nulls and empty maps: kubectl prints them (creationTimestamp, status)."""
    if isinstance(value, dict):
        kept = {k: pruned(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None and v != {}}
    if isinstance(value, list):
        return [pruned(v) for v in value]
    return value


def test_a_push_starts_the_job_kubectl_would_and_pushes_coalesce(installed: Installed) -> None:
    real = installed.real
    receiver = receiver_of(installed, "receiver")
    try:
        wait_for("the receiver to listen", receiver.listening)
        assert receiver.address is not None, receiver.said()
        wait_for("the Jobs listed", lambda: get(receiver.address, "/healthz")[0] == 200)
        began = time.monotonic()
        assert push(receiver, 1) == (202, "starting a sync")
        answered = time.monotonic() - began
        (job,) = wait_for("the push's Job", lambda: installed.push_jobs() or None)
        created = time.monotonic() - began
        print(f"push answered in {answered * 1000:.0f} ms, Job created {created * 1000:.0f} ms")

        # The Job is the one the real kubectl makes from the same CronJob.
        name = job["metadata"]["name"]
        cronjob = real.rest.get(f"/apis/batch/v1/namespaces/{NS}/cronjobs/{CRONJOB}")
        made_by_kubectl = json.loads(
            kubectl(
                real.kubeconfig,
                "create",
                "job",
                name,
                f"--from=cronjob/{CRONJOB}",
                f"--namespace={NS}",
                "--dry-run=client",
                "--output=json",
            )
        )
        ours = job_from_cronjob(cronjob, name, "push")
        del ours["metadata"]["annotations"][PUSH_ANNOTATION]
        assert pruned(ours) == pruned(made_by_kubectl)
        assert job["metadata"]["ownerReferences"] == made_by_kubectl["metadata"]["ownerReferences"]
        assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
        assert job["metadata"]["annotations"][PUSH_ANNOTATION].startswith(
            "github delivery delivery-1"
        )

        # While it runs: one more waits, the rest are covered by it; a replay starts nothing.
        assert push(receiver, 2)[1] == "a sync runs: one more starts when it ends"
        assert push(receiver, 3)[1] == "a sync already waits to start: it covers this push"
        assert push(receiver, 1)[1] == "a replay of a push seen before: nothing starts"
        real.run_job_controller(NS)
        real.kubelet(job=name, namespace=NS, phase="Succeeded")
        wait_for("the waiting sync", lambda: len(installed.push_jobs()) == 2)
        started = {j["metadata"]["annotations"][PUSH_ANNOTATION] for j in installed.push_jobs()}
        assert {what.split(",")[0] for what in started} == {
            "github delivery delivery-1",
            "github delivery delivery-2",
        }
        requests_made = [e for e in real.request_log if e["user"] == USER]
        assert {(e["verb"], e["resource"]) for e in requests_made} <= {
            ("get", "cronjobs"),
            ("create", "jobs"),
            ("list", "jobs"),
            ("watch", "jobs"),
        }
    finally:
        receiver.stop()
    lines = [json.loads(line) for line in receiver.said().splitlines() if line.startswith("{")]
    answers = [line for line in lines if line["message"].startswith("webhook:")]
    assert [a["status"] for a in answers] == [202] * 4
    assert all(a["forge"] == "github" and a["delivery"] for a in answers)


def test_a_suspended_cronjob_gets_no_sync_from_a_push(installed: Installed) -> None:
    """Suspending the CronJob stops the reconciler (an incident): a push is answered so,
    and the push waiting when the running sync ends starts nothing either."""
    real = installed.real
    path = f"/apis/batch/v1/namespaces/{NS}/cronjobs/{CRONJOB}"

    def suspend(value: bool) -> None:
        patch = {"spec": {"suspend": value}}
        status, _, body = real.raw("PATCH", path, patch, "application/merge-patch+json")
        assert status == 200, body

    receiver = receiver_of(installed, "suspended")
    try:
        wait_for("the receiver to listen", receiver.listening)
        assert receiver.address is not None, receiver.said()
        wait_for("the Jobs listed", lambda: get(receiver.address, "/healthz")[0] == 200)
        assert push(receiver, 1) == (202, "starting a sync")
        (job,) = wait_for("the push's Job", lambda: installed.push_jobs() or None)
        assert push(receiver, 2)[1] == "a sync runs: one more starts when it ends"
        suspend(True)
        assert push(receiver, 3) == (202, SUSPENDED)
        real.run_job_controller(NS)
        real.kubelet(job=job["metadata"]["name"], namespace=NS, phase="Succeeded")
        wait_for("the waiting push dropped", lambda: "no sync started" in receiver.said())
        assert len(installed.push_jobs()) == 1
        suspend(False)
        assert push(receiver, 4) == (202, "starting a sync")
        wait_for("the push's Job", lambda: len(installed.push_jobs()) == 2)
    finally:
        receiver.stop()


def a_round(installed: Installed, name: str) -> str | None:
    """A push starts a sync, a push during it one more when it ends, and the receiver
    logs no error: None if all went so, else what the receiver said."""
    installed.clear_jobs()
    receiver = receiver_of(installed, name)

    def reached(condition: Callable[[], bool]) -> bool:
        """Whether `condition` came true before the receiver exited or the round's time."""
        try:
            wait_for(
                name, lambda: receiver.process.poll() is not None or condition(), ROUND_TIMEOUT
            )
        except TimeoutError:
            return False
        return receiver.process.poll() is None and condition()

    try:
        wait_for("the receiver to listen", receiver.listening)
        address = receiver.address
        if address is None or not reached(lambda: get(address, "/healthz")[0] == 200):
            return receiver.said()
        push(receiver, 1)
        if not reached(lambda: len(installed.push_jobs()) == 1):
            return receiver.said()
        push(receiver, 2)
        (job,) = installed.push_jobs()
        installed.real.run_job_controller(NS)
        installed.real.kubelet(job=job["metadata"]["name"], namespace=NS, phase="Succeeded")
        if not reached(lambda: len(installed.push_jobs()) == 2):
            return receiver.said()
        # Without a verb it may get there late (a failed watch is followed by LISTs),
        # but not without saying so.
        return receiver.said() if '"level": "error"' in receiver.said() else None
    finally:
        receiver.stop()


def wait_access(real: RealCluster, verb: str, resource: str, *, allowed: bool) -> None:
    """Wait until the authorizer's cache says so of the receiver (a SubjectAccessReview,
    of the CronJob by name: its get is granted for that name only)."""
    attributes = {"verb": verb, "resource": resource, "group": "batch", "namespace": NS}
    if resource == "cronjobs":
        attributes["name"] = CRONJOB
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": USER, "resourceAttributes": attributes},
    }

    def decided() -> bool:
        answer = real.rest.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        return bool(answer["status"].get("allowed")) is allowed

    wait_for(f"for RBAC to {'allow' if allowed else 'deny'} {verb} {resource}", decided)


@pytest.mark.timeout(600)
def test_the_receivers_role_is_sufficient_and_minimal(installed: Installed) -> None:
    real, role = installed.real, installed.role
    assert a_round(installed, "all") is None
    for index, rule in enumerate(role["rules"]):
        for verb in rule["verbs"]:
            (resource,) = rule["resources"]
            real.rest.put(role_path(role), without(role, index, verb))
            wait_access(real, verb, resource, allowed=False)
            try:
                said = a_round(installed, f"{verb}-{resource}")
            finally:
                live = real.rest.get(role_path(role))
                real.rest.put(role_path(role), {**role, "metadata": live["metadata"]})
                wait_access(real, verb, resource, allowed=True)
            assert said is not None, f"{verb} {resource} is granted, yet the receiver never used it"
            lines = [ln for ln in said.splitlines() if "forbidden" in ln.lower()]
            assert lines, f"without {verb} {resource}: no 'forbidden' line:\n{said}"
            assert any(resource in ln for ln in lines), (verb, resource, lines)
