"""Who a live object belongs to: runtime ids, and identity that survives hand edits.

A runtime id names every object of one runtime of a job; it must spread the
spec hash's bits over all its characters, so that a changed spec almost never
keeps the old names. Live objects are recognised by more than the one
hand-editable `mxgitops.io/job` label: name, runtime id and spec hash must add up.
"""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mxgitops.manifests.spec import from_manifest
from mxgitops.model import RUNTIME_ID_LENGTH, scheduler_service_name
from mxgitops.objects import JOB_NAME_LABEL, LiveObjects, ObjectRef
from mxgitops.planning.changes import Action
from mxgitops.planning.ledger import Ledger
from mxgitops.planning.plan import plan
from tests.helpers.jobs import OPTIONS, without
from tests.helpers.jobs import WAIT as PLAN_WAIT
from tests.helpers.jobs import job as plan_job
from tests.helpers.jobs import live as plan_live
from tests.helpers.sync import (
    NS,
    Syncer,
    batch_job,
    job_objects,
    mxjob,
    summary_of,
    write,
    writes,
)
from tests.kubeapi.clients import raw
from tests.kubeapi.harness import KubeAPI

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def local_job(name: str) -> dict[str, object]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name},
        "spec": {
            "mxReplicaSpecs": {
                "Worker": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "mxnet", "image": "m"}]}},
                }
            }
        },
    }


def test_runtime_ids_use_every_character_at_every_position() -> None:
    ids = [from_manifest(local_job(f"job-{i}")).runtime_id for i in range(3600)]
    assert all(len(i) == RUNTIME_ID_LENGTH and set(i) <= set(ALPHABET) for i in ids)
    for position in range(RUNTIME_ID_LENGTH):
        counts = Counter(i[position] for i in ids)
        # 3,600 draws over 36 characters: about 100 each; a uniform encoding never
        # leaves one under 50 or over 160 (today's leading digit is 1-3, nearly always).
        assert set(counts) == set(ALPHABET), (position, sorted(counts))
        assert min(counts.values()) > 50 and max(counts.values()) < 160, (position, counts)


# -- live objects: identity beyond one label, half-done work ----------------------------


@pytest.fixture
def run(kubeapi: KubeAPI, tmp_path: Path) -> Syncer:
    return Syncer(kubeapi, tmp_path / "repo")


def relabel(api: KubeAPI, kind: str, name: str, job: str | None) -> None:
    """Set (None: remove) the mxgitops.io/job label of one object, as kubectl label would."""
    group = "/apis/batch/v1" if kind == "jobs" else "/api/v1"
    status, _, body = raw(
        api,
        "PATCH",
        f"{group}/namespaces/{NS}/{kind}/{name}",
        {"metadata": {"labels": {JOB_NAME_LABEL: job}}},
        "application/merge-patch+json",
    )
    assert status == 200, body


def lease_requests(api: KubeAPI) -> list[dict[str, Any]]:
    return [e for e in api.request_log if e["resource"] == "leases"]


def names_of(api: KubeAPI, job: str, kind: str = "jobs") -> set[str]:
    return {o["metadata"]["name"] for o in job_objects(api, job, kind)}


@pytest.mark.parametrize("label", ["b", None], ids=["moved to another job", "removed"])
def test_a_hand_edited_job_label_restarts_nothing_and_writes_nothing(
    kubeapi: KubeAPI, run: Syncer, label: str | None
) -> None:
    write(run.repo, mxjob("a"), mxjob("b"))
    run()
    kubeapi.run_job_controller(NS)
    before = {job: names_of(kubeapi, job) for job in ("a", "b")}
    edited = batch_job(kubeapi, "a", "worker", 1)
    relabel(kubeapi, "jobs", edited, label)

    for _ in range(2):  # not once: never
        kubeapi.clear_log()
        outcome = run()
        assert not writes(kubeapi), writes(kubeapi)
        assert not lease_requests(kubeapi)

    assert summary_of(outcome, "b").action == "unchanged"
    a = summary_of(outcome, "a")
    assert a.action == "hold"
    assert edited in a.reason and "left alone" in a.reason
    assert {o["metadata"]["name"] for o in kubeapi.objects("jobs", NS)} == before["a"] | before["b"]


def test_a_job_whose_every_object_lost_its_label_is_not_created_again(
    kubeapi: KubeAPI, run: Syncer
) -> None:
    write(run.repo, mxjob("a", servers=0))
    run()
    (name,) = names_of(kubeapi, "a")
    relabel(kubeapi, "jobs", name, None)
    kubeapi.clear_log()

    outcome = run()

    assert not writes(kubeapi) and not lease_requests(kubeapi)
    assert summary_of(outcome, "a").action == "hold" and name in summary_of(outcome, "a").reason


def test_a_foreign_service_on_the_scheduler_name_keeps_the_job_from_starting(
    kubeapi: KubeAPI, run: Syncer
) -> None:
    doc = mxjob("squat")
    job = from_manifest(doc, default_namespace=NS)
    foreign = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": scheduler_service_name(job), "labels": {"app": "theirs"}},
        "spec": {"selector": {"app": "theirs"}, "ports": [{"port": 80}]},
    }
    kubeapi.create(foreign, NS)
    write(run.repo, doc, mxjob("fine"))

    outcome = run()

    assert not names_of(kubeapi, "squat"), "its workers would dial the foreign Service"
    squat = summary_of(outcome, "squat")
    (error,) = squat.errors  # one line: what was refused, and that the job did not start
    assert "not managed by this mxgitops instance" in error
    assert error.endswith("; not started: its batch Jobs need this first")
    service = kubeapi.get("Service", scheduler_service_name(job), NS)
    assert service is not None and service["metadata"]["labels"] == {"app": "theirs"}
    assert len(names_of(kubeapi, "fine")) == 4 and not summary_of(outcome, "fine").errors


WAIT = {"mxgitops.io/on-change": "wait"}


def test_an_interrupted_replace_of_a_waiting_job_is_finished_by_the_next_sync(
    kubeapi: KubeAPI, run: Syncer
) -> None:
    write(run.repo, mxjob("patient", annotations=WAIT))
    run()
    kubeapi.run_job_controller(NS)
    finish_scheduler = batch_job(kubeapi, "patient", "scheduler")
    kubeapi.kubelet(job=finish_scheduler, namespace=NS, phase="Succeeded")
    write(run.repo, mxjob("patient", workers=3, annotations=WAIT))
    kubeapi.faults("delete/services:500=1")
    interrupted = run()
    assert summary_of(interrupted, "patient").action == "replace"
    assert summary_of(interrupted, "patient").errors
    # A replace deletes in the foreground: on the real server a Job stays, being
    # deleted, until the garbage collector has taken its pods.
    kubeapi.settle()
    assert not names_of(kubeapi, "patient") and names_of(kubeapi, "patient", "services")

    kubeapi.faults("")
    outcome = run()

    patient = summary_of(outcome, "patient")
    assert patient.action == "replace", patient
    assert not patient.errors
    assert len(names_of(kubeapi, "patient")) == 5
    (service,) = names_of(kubeapi, "patient", "services")
    assert service in names_of(kubeapi, "patient")  # the new runtime's, not the leftover


def test_an_interrupted_prune_of_a_waiting_job_is_finished_by_the_next_sync(
    kubeapi: KubeAPI, run: Syncer
) -> None:
    write(run.repo, mxjob("patient", annotations=WAIT), mxjob("other"))
    run()
    kubeapi.run_job_controller(NS)
    kubeapi.kubelet(job=batch_job(kubeapi, "patient", "scheduler"), namespace=NS, phase="Succeeded")
    (run.repo / "patient.yaml").unlink()
    kubeapi.faults("delete/services:500=1")
    interrupted = run()
    assert summary_of(interrupted, "patient").action == "delete"
    assert not names_of(kubeapi, "patient") and names_of(kubeapi, "patient", "services")

    kubeapi.faults("")
    outcome = run()

    assert summary_of(outcome, "patient").action == "delete"
    assert not names_of(kubeapi, "patient", "services")
    kubeapi.clear_log()
    assert "patient" not in {j.name for j in run().summary.jobs}


def test_a_half_created_replace_of_a_waiting_job_is_completed_not_held(
    kubeapi: KubeAPI, run: Syncer
) -> None:
    """The old runtime's Jobs went, then only some of the new runtime's objects were
    created (the sync was killed): the job is neither old nor new, and not held."""
    write(run.repo, mxjob("patient", annotations=WAIT))
    run()
    kubeapi.run_job_controller(NS)
    kubeapi.kubelet(job=batch_job(kubeapi, "patient", "scheduler"), namespace=NS, phase="Succeeded")
    write(run.repo, mxjob("patient", workers=3, annotations=WAIT))
    kubeapi.faults("create/jobs:500=1")
    interrupted = run()
    assert interrupted.summary.jobs[0].errors
    new_service = names_of(kubeapi, "patient", "services")
    assert len(new_service) == 1 and not names_of(kubeapi, "patient")
    kubeapi.faults("")
    kubeapi.run_job_controller(NS)

    outcome = run()

    assert summary_of(outcome, "patient").action in ("replace", "repair")
    assert not summary_of(outcome, "patient").errors
    assert len(names_of(kubeapi, "patient")) == 5
    assert names_of(kubeapi, "patient", "services") == new_service


# -- plan: which leftovers are a running job ---------------------------------------------


@pytest.mark.parametrize(
    ("ttl", "action"),
    [(None, Action.REPLACE), (600, Action.HOLD)],
    ids=["batch Job deleted: replaced", "batch Job gone by an earlier version's TTL: waits"],
)
def test_a_waiting_job_missing_a_batch_job_is_held_only_when_a_ttl_explains_it(
    ttl: int | None, action: Action
) -> None:
    """Earlier versions set ttlSecondsAfterFinished on each batch Job (the TTL is
    job-wide now, `plan.py`): a batch Job of theirs may be gone while the job runs."""
    policy = {"runPolicy": {"ttlSecondsAfterFinished": ttl}} if ttl else {}
    old = plan_job("w", annotations=PLAN_WAIT, **policy)
    new = plan_job("w", workers=3, annotations=PLAN_WAIT)
    objects = plan_live(old)
    if ttl:
        objects = LiveObjects(
            tuple(
                {**j, "spec": {**j["spec"], "ttlSecondsAfterFinished": ttl}} for j in objects.jobs
            ),
            objects.services,
        )
    gone = next(o for o in objects.jobs if "-worker-" in o["metadata"]["name"])

    (change,) = plan([new], without(objects, gone), Ledger(), OPTIONS).changes

    assert change.action is action, change.reason
    if action is Action.REPLACE:
        assert "not held: 1 of its batch Jobs are gone" in change.reason
        assert set(change.deletes) == {ObjectRef.of(o) for o in without(objects, gone).all()}
        assert len(change.creates) == 6
        assert change.first == (ObjectRef.of(change.creates[-1]),)  # the Service


def test_a_stray_of_another_runtime_is_not_counted_as_this_one() -> None:
    """A live object named as job a's but annotated with another spec's hash."""
    a = plan_job("a")
    objects = plan_live(a)
    edited = copy.deepcopy(objects.jobs[0])
    edited["metadata"]["annotations"]["mxgitops.io/spec-hash"] = "0" * 64
    changed = LiveObjects((edited, *objects.jobs[1:]), objects.services)

    (change,) = plan([a], changed, Ledger(), OPTIONS).changes

    assert change.action is Action.HOLD and not change.writes
    assert edited["metadata"]["name"] in change.reason
    assert "mxgitops.io/spec-hash" in change.reason
