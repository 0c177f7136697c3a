"""plan(): the pure diff of desired jobs, live objects and the ledger. No cluster here:
live objects are rendered with `render_job` and given a status by hand."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from mxgitops.objects import KubeObject, LiveObjects, ObjectRef
from mxgitops.planning.changes import Action
from mxgitops.planning.ledger import Finished, Ledger
from mxgitops.planning.plan import plan
from mxgitops.runtimes.batch.render import render_job
from mxgitops.runtimes.shared.failure import Failure
from mxgitops.runtimes.shared.state import ReplicaState, State
from tests.helpers.jobs import (
    BATCH,
    BATCH_ONLY,
    CTX,
    NS,
    OPTIONS,
    WAIT,
    finish,
    job,
    live,
    only,
    without,
)


def refs(objs: tuple[KubeObject, ...] | list[KubeObject]) -> list[ObjectRef]:
    return sorted(ObjectRef.of(o) for o in objs)


def test_a_new_job_is_created_with_its_rendered_objects() -> None:
    a = job("a")
    result = plan([a], LiveObjects(), BATCH_ONLY, OPTIONS)
    change = only(result)
    assert (change.action, change.reason, change.state) == (Action.CREATE, "new job", State.PENDING)
    assert change.runtime_id == a.runtime_id
    assert list(change.creates) == render_job(a, CTX)
    assert (change.spec_hash, change.source) == (a.spec_hash, "jobs/a.yaml")
    assert result.writes and not result.ledger_changed and result.prune_refused is None


def test_an_unchanged_job_writes_nothing() -> None:
    a = job("a")
    result = plan([a], live(a), BATCH_ONLY, OPTIONS)
    change = only(result)
    # Batch Jobs without pods yet: nothing runs.
    assert (change.action, change.state, change.writes) == (Action.UNCHANGED, State.PENDING, False)
    assert [r.type for r in change.replicas] == ["SCHEDULER", "SERVER", "WORKER"]
    assert not result.writes


def test_missing_objects_are_repaired_and_only_those() -> None:
    a = job("a")
    objects = render_job(a, CTX)
    worker = objects[-2]["metadata"]["name"]
    change = only(plan([a], without(live(a), objects[-2], objects[-1]), BATCH_ONLY, OPTIONS))
    assert change.action is Action.REPAIR
    assert refs(change.creates) == refs([objects[-2], objects[-1]])
    assert not change.deletes
    assert "2 of its objects are missing" in change.reason and worker in change.reason


def test_a_job_left_with_its_service_alone_is_not_read_running() -> None:
    """A first sync killed after the Service and before any batch Job (issue 30: the
    CronJob's pod OOM-killed mid-apply): nothing of the job runs; the sync that
    finishes it says Pending, as a create does."""
    a = job("a")
    service = [o for o in render_job(a, CTX) if o["kind"] == "Service"]
    change = only(plan([a], LiveObjects(services=tuple(service)), BATCH_ONLY, OPTIONS))
    assert (change.action, change.state) == (Action.REPAIR, State.PENDING), change.reason


def test_batch_jobs_an_earlier_versions_ttl_collected_are_not_run_again() -> None:
    """Earlier versions set the TTL on each batch Job; it is job-wide now
    (tests/planning/test_ttl.py), so a batch Job missing from a job whose objects carry none
    was deleted: repaired."""
    a = job("a", runPolicy={"ttlSecondsAfterFinished": 60})
    objects = render_job(a, CTX)
    worker = next(o for o in objects if "-worker-" in o["metadata"]["name"])
    service = next(o for o in objects if o["kind"] == "Service")
    earlier = live(a)
    earlier = dataclasses.replace(
        earlier,
        jobs=tuple(
            {**j, "spec": {**j["spec"], "ttlSecondsAfterFinished": 60}} for j in earlier.jobs
        ),
    )
    collected = only(plan([a], without(earlier, worker), BATCH_ONLY, OPTIONS))
    assert (collected.action, collected.creates) == (Action.UNCHANGED, ())
    assert "ttlSecondsAfterFinished" in collected.reason
    repaired = only(plan([a], without(earlier, worker, service), BATCH_ONLY, OPTIONS))
    assert (repaired.action, refs(repaired.creates)) == (Action.REPAIR, refs([service]))
    deleted = only(plan([a], without(live(a), worker), BATCH_ONLY, OPTIONS))
    assert (deleted.action, refs(deleted.creates)) == (Action.REPAIR, refs([worker]))


def test_a_changed_spec_replaces_old_runtime_by_new() -> None:
    old, new = job("a"), job("a", workers=3)
    assert old.runtime_id != new.runtime_id
    change = only(plan([new], live(old), BATCH_ONLY, OPTIONS))
    assert change.action is Action.REPLACE
    assert list(change.deletes) == refs(render_job(old, CTX))
    assert list(change.creates) == render_job(new, CTX)
    assert old.runtime_id in change.reason and new.runtime_id in change.reason
    assert change.spec_hash == new.spec_hash


def test_on_change_wait_holds_while_running_and_replaces_once_finished() -> None:
    old, new = job("a", annotations=WAIT), job("a", workers=3, annotations=WAIT)
    held = only(plan([new], live(old), BATCH_ONLY, OPTIONS))
    assert (held.action, held.state, held.writes) == (Action.HOLD, State.WAITING, False)
    assert "replaced when the pending job finishes" in held.reason
    assert held.runtime_id == old.runtime_id
    done = only(plan([new], finish(live(old), "-scheduler-"), BATCH_ONLY, OPTIONS))
    assert (done.action, done.state) == (Action.REPLACE, State.PENDING)  # the new runtime starts
    assert done.runtime_id == new.runtime_id and "replace under way" in done.reason
    assert {r.state for r in done.replicas} == {ReplicaState.PENDING}


def test_a_finished_job_is_not_rerun_and_is_recorded_in_the_ledger() -> None:
    a = job("a")
    result = plan([a], finish(live(a), "-"), BATCH_ONLY, OPTIONS)
    change = only(result)
    assert (change.action, change.state, change.writes) == (
        Action.UNCHANGED,
        State.SUCCEEDED,
        False,
    )
    assert result.ledger_changed and result.writes
    assert result.ledger.entries == {
        (NS, "a"): Finished(NS, "a", a.spec_hash, "Succeeded", "2026-01-02T03:04:05+00:00")
    }
    # Objects gone (TTL): the ledger alone keeps it from running again.
    again = plan([a], LiveObjects(), result.ledger, OPTIONS)
    assert (only(again).action, only(again).state) == (Action.UNCHANGED, State.SUCCEEDED)
    assert not again.writes
    # A new spec runs again.
    changed = only(plan([job("a", workers=3)], LiveObjects(), result.ledger, OPTIONS))
    assert changed.action is Action.CREATE


def test_a_failed_job_is_recorded_as_failed_and_its_missing_objects_not_repaired() -> None:
    a = job("a", servers=0, workers=1)
    failed = {"conditions": [{"type": "Failed", "status": "True"}]}
    result = plan([a], finish(live(a), "-worker-", failed), BATCH_ONLY, OPTIONS)
    assert (only(result).action, only(result).state) == (Action.UNCHANGED, State.FAILED)
    assert result.ledger.entries[(NS, "a")].state == "Failed"
    # Why, as far as the batch Job says (its pods are gone), is kept in the entry.
    failure = Failure.from_json(result.ledger.entries[(NS, "a")].failure)
    assert failure is not None and failure.replica == "WORKER 0"


def test_the_ledger_overrides_the_state_of_live_objects_and_is_not_rewritten() -> None:
    a = job("a")
    book = Ledger({(NS, "a"): Finished(NS, "a", a.spec_hash, "Failed", "t")}, runtimes=BATCH)
    result = plan([a], finish(live(a), "-"), book, OPTIONS)
    assert (only(result).action, only(result).state) == (Action.UNCHANGED, State.FAILED)
    assert not result.ledger_changed and result.ledger is book


def test_ledger_entries_of_jobs_known_to_neither_side_are_kept_for_the_retention() -> None:
    a = job("a")
    book = Ledger({(NS, "gone"): Finished(NS, "gone", "h", "Succeeded", "t")})
    result = plan([a], live(a), book, OPTIONS)
    assert result.ledger_changed
    assert result.ledger.entries[(NS, "gone")].unseen_since == "2026-01-02T03:04:05+00:00"


@pytest.mark.parametrize(
    ("policy", "action", "deleted"),
    [
        ("All", Action.CLEAN, ["scheduler", "scheduler", "server", "worker", "worker"]),
        ("Running", Action.CLEAN, ["server", "worker", "worker"]),
        # Nothing of it is cleaned, but what still runs is stopped: it holds nothing.
        ("None", Action.STOP, ["server", "worker", "worker"]),
    ],
)
def test_clean_pod_policy_of_a_finished_job(
    policy: str, action: Action, deleted: list[str]
) -> None:
    a = job("a", cleanPodPolicy=policy)
    change = only(plan([a], finish(live(a), "-scheduler-"), BATCH_ONLY, OPTIONS))
    assert change.action is action
    assert sorted(r.name.split("-")[1] for r in change.deletes) == deleted
    assert not change.creates


def test_the_inline_v1_clean_pod_policy_default_cleans_a_finished_job_and_replaces_none() -> None:
    """mxnet-operator's inline v1 form without cleanPodPolicy: All, as its operator did.
    Its spec hash is that of earlier versions' reading (None), so a job they synced,
    running or finished, is the same job: nothing is replaced or run again, and the
    finished one's objects go (the ledger records it, `test_ledger`)."""
    inline = job("a", backoffLimit=2)
    assert inline.run_policy.clean_pod_policy_defaulted
    running = only(plan([inline], live(inline), BATCH_ONLY, OPTIONS))
    assert running.action is Action.UNCHANGED, running.reason
    done = only(plan([inline], finish(live(inline), "-scheduler-"), BATCH_ONLY, OPTIONS))
    assert (done.action, done.state) == (Action.CLEAN, State.SUCCEEDED), done.reason
    assert "cleanPodPolicy All" in done.reason and len(done.deletes) == 5
    assert not done.creates


def test_a_removed_manifest_prunes_its_job() -> None:
    a, b, c = job("a"), job("b"), job("c")
    result = plan([a, b], live(a, b, c), BATCH_ONLY, OPTIONS)
    assert [ch.name for ch in result.changes] == ["a", "b", "c"]
    pruned = result.changes[2]
    assert (pruned.action, pruned.reason) == (Action.DELETE, "manifest removed")
    assert list(pruned.deletes) == refs(render_job(c, CTX))
    assert (pruned.spec_hash, pruned.source) == (c.spec_hash, "jobs/c.yaml")


def test_no_prune_when_pruning_is_off_or_the_manifest_is_invalid() -> None:
    a, b, c = job("a"), job("b"), job("c")
    off = plan([a], live(a, b, c), BATCH_ONLY, dataclasses.replace(OPTIONS, prune=False))
    assert [(ch.action, ch.reason) for ch in off.changes[1:]] == [
        (Action.HOLD, "manifest removed; pruning is off")
    ] * 2
    invalid = plan(
        [a], live(a, b, c), BATCH_ONLY, OPTIONS, invalid=frozenset({(NS, "b"), (NS, "c")})
    )
    assert {ch.name: ch.action for ch in invalid.changes} == {
        "a": Action.UNCHANGED,
        "b": Action.HOLD,
        "c": Action.HOLD,
    }
    assert not invalid.writes


def test_an_orphan_that_asked_to_wait_is_pruned_only_once_finished() -> None:
    a, b = job("a"), job("b", annotations=WAIT)
    held = plan([a], live(a, b), BATCH_ONLY, OPTIONS)
    assert held.changes[1].action is Action.HOLD
    done = plan([a], finish(live(a, b), "b-scheduler-"), BATCH_ONLY, OPTIONS)
    assert done.changes[1].action is Action.DELETE


def test_zero_valid_manifests_refuse_to_prune_unless_forced() -> None:
    a, b = job("a"), job("b")
    refused = plan([], live(a, b), BATCH_ONLY, OPTIONS)
    assert refused.prune_refused is not None and "no valid manifest" in refused.prune_refused
    assert {ch.action for ch in refused.changes} == {Action.HOLD}
    assert not refused.writes and all(not ch.deletes for ch in refused.changes)
    forced = plan([], live(a, b), BATCH_ONLY, dataclasses.replace(OPTIONS, force_prune=True))
    assert {ch.action for ch in forced.changes} == {Action.DELETE}
    assert forced.prune_refused is None


def test_pruning_more_than_the_allowed_share_is_refused() -> None:
    jobs = [job(n) for n in "abcd"]
    three = plan(jobs[:1], live(*jobs), BATCH_ONLY, OPTIONS)
    assert three.prune_refused is not None and "3 of 4 live jobs (75%)" in three.prune_refused
    assert three.count(Action.HOLD) == 3
    two = plan(jobs[:2], live(*jobs), BATCH_ONLY, OPTIONS)  # 50% is allowed
    assert two.prune_refused is None and two.count(Action.DELETE) == 2
    lax = plan(
        jobs[:1], live(*jobs), BATCH_ONLY, dataclasses.replace(OPTIONS, max_prune_share=0.75)
    )
    assert lax.count(Action.DELETE) == 3


def test_unnamed_invalid_manifests_block_every_prune() -> None:
    a, b = job("a"), job("b")
    result = plan([a], live(a, b), BATCH_ONLY, OPTIONS, unnamed_invalid=1)
    refused = result.prune_refused
    assert refused is not None and "1 invalid manifest names no job" in refused
    assert result.changes[1].action is Action.HOLD
    nothing_to_prune = plan([a], live(a), BATCH_ONLY, OPTIONS, unnamed_invalid=1)
    assert nothing_to_prune.prune_refused is None


def test_objects_of_another_namespace_are_another_job() -> None:
    a = job("a")
    elsewhere = dataclasses.replace(a, namespace="other")
    result = plan([a], live(a, elsewhere), BATCH_ONLY, OPTIONS)
    assert [(c.namespace, c.action) for c in result.changes] == [
        ("ml", Action.UNCHANGED),
        ("other", Action.DELETE),
    ]


def test_plan_is_pure_and_deterministic() -> None:
    a, b, c = job("a"), job("b", workers=3), job("c")
    objects = live(job("b"), c)
    snapshot = copy.deepcopy(objects)
    book = Ledger({(NS, "x"): Finished(NS, "x", "h", "Failed", "t")}, "1")
    first = plan([c, b, a], objects, book, OPTIONS)
    assert objects == snapshot and book.entries[(NS, "x")].state == "Failed"
    assert plan([a, b, c], objects, book, OPTIONS) == first
    assert [ch.name for ch in first.changes] == ["a", "b", "c"]
    assert [ch.action for ch in first.changes] == [Action.CREATE, Action.REPLACE, Action.UNCHANGED]


def test_a_finished_job_with_only_orphaned_pods_left_is_not_rerun() -> None:
    a = job("a")
    labels = dict(live(a).jobs[0]["spec"]["template"]["metadata"]["labels"])
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NS, "labels": labels},
    }
    book = Ledger({a.key: Finished(NS, "a", a.spec_hash, "Succeeded", "t")})
    change = only(plan([a], LiveObjects(pods=(pod,)), book, OPTIONS))
    assert (change.action, change.state, change.writes) == (
        Action.UNCHANGED,
        State.SUCCEEDED,
        False,
    )
