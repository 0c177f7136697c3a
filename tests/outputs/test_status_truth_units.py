"""Issue 9's pure parts alone: in-place comparison, the upgrade's legacy hashes, the
note's refresh and age, failure accounts and log tails (no cluster, no Git)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mxgitops.objects import LiveObjects
from mxgitops.outputs import report, summary
from mxgitops.planning.changes import Action
from mxgitops.planning.ledger import Finished, Ledger
from mxgitops.planning.plan import plan
from mxgitops.runtimes.batch.failure import replica_failure
from mxgitops.runtimes.batch.inplace import compare as compare_in_place
from mxgitops.runtimes.batch.render import job_refs
from mxgitops.runtimes.shared.state import State
from mxgitops.state.failurelog import keep_end
from tests.helpers.jobs import NS, OPTIONS, finish, job, live, only


def test_a_changed_in_place_field_is_an_update_and_a_hand_edit_a_repair() -> None:
    before = job("a", restart="OnFailure", backoffLimit=2)
    after = job("a", restart="OnFailure", backoffLimit=4)
    assert before.spec_hash == after.spec_hash  # no new runtime
    update = only(plan([after], live(before), Ledger(), OPTIONS))
    assert update.action is Action.UPDATE
    assert "spec.backoffLimit 2 -> 4" in update.reason and not update.creates
    assert {p.patch["spec"]["backoffLimit"] for p in update.patches} == {4}
    edited = live(before)
    hand = copy.deepcopy(edited.jobs[0])
    hand["spec"]["backoffLimit"] = 9
    drifted = LiveObjects((hand, *edited.jobs[1:]), edited.services)
    repair = only(plan([before], drifted, Ledger(), OPTIONS))
    assert repair.action is Action.REPAIR
    assert "spec.backoffLimit 9 -> 2 (set back)" in repair.reason
    assert [p.ref.name for p in repair.patches] == [hand["metadata"]["name"]]
    assert only(plan([before], live(before), Ledger(), OPTIONS)).action is Action.UNCHANGED


def test_a_never_replicas_backoff_limit_stays_0_whatever_the_jobs() -> None:
    """Under Never nothing retries: the job's backoffLimit moves only its record."""
    before, after = job("a", backoffLimit=2), job("a", backoffLimit=4)
    assert {j["spec"]["backoffLimit"] for j in live(before).jobs} == {0}
    update = only(plan([after], live(before), Ledger(), OPTIONS))
    assert update.action is Action.UPDATE
    assert all("spec" not in p.patch for p in update.patches)
    assert only(plan([before], live(before), Ledger(), OPTIONS)).action is Action.UNCHANGED


def test_resuming_and_dropping_wait_patch_in_place() -> None:
    paused = job("a", servers=0, workers=1, suspend=True)
    resumed = job("a", servers=0, workers=1)
    (patch,) = compare_in_place(resumed, live(paused).jobs, ())
    assert patch.patch == {
        "metadata": {"annotations": {"mxgitops.io/in-place": None}},
        "spec": {"suspend": False},
    }
    waiting = job("a", annotations={"mxgitops.io/on-change": "wait"})
    eager = job("a")
    patches = compare_in_place(eager, live(waiting).jobs, live(waiting).services)
    assert len(patches) == 5  # four batch Jobs and the Service
    assert all(
        p.patch["metadata"]["annotations"] == {"mxgitops.io/on-change": None} for p in patches
    )


def test_a_job_finished_before_the_upgrade_does_not_run_again() -> None:
    tuned = job("a", backoffLimit=2)
    assert len(tuned.earlier_spec_hashes) == 2 and tuned.spec_hash not in tuned.earlier_spec_hashes
    assert len(job("b").earlier_spec_hashes) == 1  # sets none: only the rendering moved
    for earlier in tuned.earlier_spec_hashes:
        book = Ledger({(NS, "a"): Finished(NS, "a", earlier, "Succeeded", "t")})
        change = only(plan([tuned], LiveObjects(), book, OPTIONS))
        assert (change.action, change.state) == (Action.UNCHANGED, State.SUCCEEDED)


def test_a_job_running_before_the_rendering_changed_is_replaced() -> None:
    """RENDERING joined the hash: a job running under the earlier rendering (ClusterIP
    Service, names that do not resolve, Kubernetes' retries) gets a new runtime."""
    current, before = job("a"), job("a")
    (earlier,) = current.earlier_spec_hashes
    before.__dict__["spec_hash"] = earlier  # rendered as the earlier mxgitops named it
    assert before.runtime_id != current.runtime_id
    change = only(plan([current], live(before), Ledger(), OPTIONS))
    assert change.action is Action.REPLACE, change.reason
    assert {r.name for r in change.deletes} == {r.name for r in job_refs(before)}
    finished = only(plan([current], finish(live(before), "-scheduler-"), Ledger(), OPTIONS))
    assert (finished.action, finished.state) == (Action.STOP, State.SUCCEEDED)


def test_the_note_is_kept_while_only_its_time_moves_and_rewritten_hourly() -> None:
    then = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    previous = summary.Summary(commit="c", synced_at="2026-01-01T12:00:00Z", version="1")
    soon = summary.Summary(commit="c", synced_at="2026-01-01T12:05:00Z", version="1")
    later = summary.Summary(commit="c", synced_at="2026-01-01T13:00:00Z", version="1")
    assert report.for_note(soon, previous) is previous
    assert report.for_note(later, previous) == later
    assert report.for_note(summary.Summary(commit="c", problems=("x",)), previous).problems
    assert report.age(previous, then + timedelta(minutes=5)) == "5 minutes ago"
    assert report.age(previous, then + timedelta(hours=2, minutes=1)) == "2 hours ago"
    assert "unknown age" in report.age(summary.Summary(), then)


def test_a_failure_names_the_container_and_the_batch_jobs_verdict() -> None:
    failed_job = {
        "status": {
            "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]
        }
    }
    terminated = {"exitCode": 137, "reason": "OOMKilled", "message": "out of\nmemory"}
    pod = {
        "metadata": {"name": "a-worker-x-0-abc"},
        "status": {
            "phase": "Failed",
            "containerStatuses": [{"name": "mxnet", "state": {"terminated": terminated}}],
        },
    }
    failure = replica_failure("WORKER 0", failed_job, [pod])
    assert failure is not None
    assert (failure.exit_code, failure.reason, failure.message, failure.pod) == (
        137,
        "OOMKilled; BackoffLimitExceeded",
        "out of memory",
        "a-worker-x-0-abc",
    )
    assert (
        failure.describe() == "WORKER 0 exited 137 (OOMKilled; BackoffLimitExceeded): out of memory"
    )
    assert replica_failure("WORKER 0", {"status": {}}, [pod]) is not None  # the pod says so
    assert replica_failure("WORKER 0", {"status": {"succeeded": 1}}, [pod]) is None


def test_a_log_tail_keeps_the_end_within_its_bytes() -> None:
    text = "".join(f"line {n} é\n" for n in range(1000))
    kept = keep_end(text, 100)
    assert len(kept.encode()) <= 100 and kept.endswith("line 999 é\n")
    assert kept.startswith("line ")  # cut at a line
    assert keep_end("short\n", 100) == "short\n"


def test_the_top_level_help_lists_every_exit_code() -> None:
    from click.testing import CliRunner

    from mxgitops.cli import ExitCode, main

    text = CliRunner().invoke(main, ["--help"]).output
    listed = text.split("Exit codes:")[1].split("Options:")[0]
    for code in ExitCode:
        assert f" {code.value} " in f" {listed} ", code


def test_the_cancel_list_names_jobs_as_namespace_and_name(tmp_path: Path) -> None:
    from mxgitops.errors import ConfigError
    from mxgitops.manifests import repofile

    (tmp_path / ".mxgitops.yaml").write_text("cancel: [ml/a, other/b]\n")
    assert repofile.read(tmp_path).values["cancel"] == ("ml/a", "other/b")
    for bad in ("cancel: ml/a\n", "cancel: [a]\n", "cancel: [ml/a/b]\n", "cancel: [3]\n"):
        (tmp_path / ".mxgitops.yaml").write_text(bad)
        with pytest.raises(ConfigError, match="cancel"):
            repofile.read(tmp_path)


def test_a_pending_replica_says_why_and_a_suspended_job_is_suspended() -> None:
    from mxgitops.runtimes.batch.status import replica_state
    from mxgitops.runtimes.shared.pods import pending_reason
    from mxgitops.runtimes.shared.state import ReplicaState

    unscheduled = {
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "message": "0/4 nodes are available"}
            ],
        }
    }
    pulling = {
        "status": {
            "phase": "Pending",
            "containerStatuses": [
                {"name": "mxnet", "state": {"waiting": {"reason": "ErrImagePull", "message": "no"}}}
            ],
        }
    }
    assert pending_reason(unscheduled) == "0/4 nodes are available"
    assert pending_reason(pulling) == "ErrImagePull: no"
    assert replica_state({"status": {}}, [pulling]) is ReplicaState.PENDING
    assert replica_state({"spec": {"suspend": True}, "status": {}}, []) is ReplicaState.SUSPENDED
    paused = job("a", servers=0, workers=1, suspend=True)
    change = only(plan([paused], live(paused), Ledger(), OPTIONS))
    assert (change.action, change.state) == (Action.UNCHANGED, State.SUSPENDED)
