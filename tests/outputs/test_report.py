"""report: summaries of a plan and its change set, rendered, parsed back, carried forward."""

from __future__ import annotations

import dataclasses
import json

from mxgitops.objects import LiveObjects
from mxgitops.outputs import report
from mxgitops.outputs.summary import JobSummary, ReplicaSummary, Summary
from mxgitops.planning.changes import Action
from mxgitops.planning.ledger import Ledger
from mxgitops.planning.plan import plan
from mxgitops.state.apply import ChangeResult, ChangeSet
from tests.helpers.jobs import OPTIONS, finish, job, live


def sample() -> Summary:
    """Create a, replace b (which failed), unchanged c, and c's finished neighbour d."""
    a, b_old, b_new, c, d = job("a"), job("b"), job("b", workers=3), job("c"), job("d")
    objects = live_of(live(b_old, c), finish(live(d), "-"))
    the_plan = plan([a, b_new, c, d], objects, Ledger(), OPTIONS)
    failed = next(ch for ch in the_plan.changes if ch.name == "b")
    changeset = ChangeSet((ChangeResult(failed, errors=("create job/b-x: boom",)),))
    return report.summarize(
        the_plan,
        changeset,
        problems=["jobs/e.yaml:3: job e: spec: bad"],
        commit="0123456789abcdef",
        instance="t1",
    )


def live_of(*objects: LiveObjects) -> LiveObjects:
    return LiveObjects(
        tuple(o for x in objects for o in x.jobs), tuple(o for x in objects for o in x.services)
    )


def test_summarize_names_actions_objects_states_and_errors() -> None:
    summary = sample()
    by_name = {j.name: j for j in summary.jobs}
    assert {n: j.action for n, j in by_name.items()} == {
        "a": "create",
        "b": "replace",
        "c": "unchanged",
        "d": "unchanged",
    }
    assert by_name["a"].objects[0].startswith("+job/a-scheduler-")
    assert by_name["b"].objects[0].startswith("-job/b-") and by_name["b"].objects[-1].startswith(
        "+service/b-scheduler-"
    )
    assert by_name["b"].errors == ("create job/b-x: boom",)
    assert by_name["d"].state == "Succeeded"
    scheduler = by_name["d"].replicas[0]
    assert (scheduler.type, scheduler.state, scheduler.replicas) == ("SCHEDULER", "Succeeded", 1)
    assert by_name["c"].spec_hash == job("c").spec_hash and by_name["c"].source == "jobs/c.yaml"
    assert not summary.ok
    assert summary.counts() == {"create": 1, "replace": 1, "unchanged": 2}
    assert dataclasses.replace(summary, problems=(), jobs=summary.jobs[2:]).ok


def test_note_round_trip() -> None:
    summary = sample()
    note = report.render_note(summary)
    assert note.startswith("mxgitops status of 0123456789ab (instance t1)")
    assert report.NOTE_MARKER in note
    assert report.parse_note(note) == summary
    assert Summary.from_dict(json.loads(report.render_json(summary))) == summary


def test_parse_note_of_something_else_is_none() -> None:
    assert report.parse_note("") is None
    assert report.parse_note("a note a person wrote") is None
    assert report.parse_note(f"table\n{report.NOTE_MARKER}\n{{not json") is None
    assert report.parse_note(f"{report.NOTE_MARKER}\n[1, 2]") is None


def test_render_plan_shows_what_changes_and_why() -> None:
    summary = sample()
    text = report.render_plan(summary)
    assert text.splitlines()[0] == (
        "Sync of 0123456789ab (instance t1): 1 created, 1 replaced, 2 unchanged"
    )
    assert "  + create    ml/a: new job" in text
    assert "      error: create job/b-x: boom" in text
    assert "ml/c" not in text  # unchanged jobs only with --verbose
    assert "ml/c" in report.render_plan(summary, verbose=True)
    assert "Invalid: jobs/e.yaml:3: job e: spec: bad" in text
    dry = report.render_plan(dataclasses.replace(summary, dry_run=True))
    assert dry.startswith("Plan of 0123456789ab (instance t1): 1 to create, 1 to replace")
    assert "+job/a-scheduler-" in dry  # a dry run lists the objects
    refused = dataclasses.replace(summary, prune_refused="too many")
    assert "Pruning refused: too many" in report.render_plan(refused)
    assert report.render_plan(Summary(instance="t1")) == "Sync (instance t1): no jobs"


def test_render_table_has_a_row_per_job() -> None:
    table = report.render_table(sample())
    header = table.splitlines()[2]
    assert header.split() == ["JOB", "STATE", "RUNTIME", "REPLICAS", "ACTION", "ERRORS"]
    row = next(line for line in table.splitlines() if line.startswith("ml/d "))
    assert "Succeeded" in row and "SCHEDULER Succeeded" in row
    assert "invalid: jobs/e.yaml:3" in table


def test_render_markdown_is_a_table_with_escaped_cells() -> None:
    summary = sample()
    broken = dataclasses.replace(summary.jobs[0], errors=("a|b",))
    markdown = report.render_markdown(dataclasses.replace(summary, jobs=(broken,)))
    lines = markdown.splitlines()
    assert lines[2:4] == [
        "| JOB | STATE | RUNTIME | REPLICAS | ACTION | ERRORS |",
        "|---|---|---|---|---|---|",
    ]
    assert lines[4].startswith(f"| `{broken.qualified_name}` |") and r"`a\|b`" in lines[4]
    assert "invalid: `jobs/e.yaml:3" in markdown


def unchanged(name: str, spec_hash: str = "h", errors: tuple[str, ...] = ()) -> JobSummary:
    return JobSummary(
        "ml", name, "unchanged", "in sync", "Running", spec_hash, errors=errors, runtime_id="x"
    )


def test_carry_forward_keeps_the_last_real_action_of_unchanged_jobs() -> None:
    created = JobSummary(
        "ml",
        "a",
        "create",
        "new job",
        "",
        "h",
        objects=("+job/a-worker-x-0",),
        replicas=(ReplicaSummary("WORKER", "Unknown", 1),),
        runtime_id="x",  # the live runtime: what the cluster confirms
    )
    previous = Summary(commit="c", jobs=(created, dataclasses.replace(created, name="b")))
    now = Summary(
        commit="c",
        jobs=(unchanged("a"), unchanged("b", spec_hash="other"), unchanged("c")),
    )
    carried = report.carry_forward(now, previous)
    a, b, c = carried.jobs
    assert (a.action, a.reason, a.objects) == ("create", "new job", ("+job/a-worker-x-0",))
    assert (a.state, a.replicas) == ("Running", ())  # state is today's
    assert b == now.jobs[1]  # another spec: nothing to carry
    assert c == now.jobs[2]
    assert report.carry_forward(now, None) == now
    failing = Summary(jobs=(unchanged("a", errors=("boom",)),))
    assert report.carry_forward(failing, previous) == failing
    # What the cluster does not confirm, or mxgitops would not say, is not carried.
    for forged in (
        dataclasses.replace(created, runtime_id="y", objects=("+job/a-worker-y-0",)),
        dataclasses.replace(created, reason="approved by @org/security"),
        dataclasses.replace(created, objects=("+job/evil-worker-x-0",)),
        dataclasses.replace(created, action="delete", reason="manifest removed"),
    ):
        alone = Summary(commit="c", jobs=(unchanged("a"),))
        assert report.carry_forward(alone, Summary(commit="c", jobs=(forged,))) == alone
    # A replace that went through: its deletes name the older runtime, its creates this one.
    replaced = dataclasses.replace(
        created,
        action="replace",
        reason="spec changed; replace under way (runtime w -> x)",
        objects=("-job/a-worker-w-0", "+job/a-worker-x-0"),
    )
    alone = Summary(commit="c", jobs=(unchanged("a"),))
    (kept,) = report.carry_forward(alone, Summary(commit="c", jobs=(replaced,))).jobs
    assert (kept.action, kept.objects) == ("replace", replaced.objects)
    # A sync that changes nothing leaves the note as it was.
    note = report.render_note(report.carry_forward(now, previous))
    again = report.carry_forward(now, report.parse_note(note))
    assert report.render_note(again) == note


def test_replica_summary_describes_counts() -> None:
    replica = ReplicaSummary("WORKER", "Running", 3, {"Running": 2, "Succeeded": 1})
    assert replica.describe() == "WORKER Running (2 running, 1 succeeded)"
    assert Action.UNCHANGED.value == "unchanged"


def test_a_note_of_a_newer_mxgitops_reads_with_its_new_fields_left_out() -> None:
    """Fields an older mxgitops does not know are skipped, at every level: a newer
    writer's note is still the summary it holds, not an ill-typed note to rewrite."""
    failure = {"replica": "WORKER", "exit_code": 1, "reason": "Error", "message": "",
               "pod": "a-worker-0", "container": "mxnet", "log": "boom"}  # fmt: skip
    failed = dataclasses.replace(sample().jobs[0], failure=failure)
    summary = dataclasses.replace(sample(), jobs=(failed, *sample().jobs[1:]))
    data = json.loads(report.render_json(summary))
    data["queue_stats"] = {"admitted": 3}
    for entry in data["jobs"]:
        entry["runtime"] = "jobset"
        for replica in entry.get("replicas", []):
            replica["ready"] = 1
        if entry.get("failure"):
            entry["failure"]["signal"] = 9
    assert Summary.from_dict(data) == summary


def test_a_job_run_on_another_cluster_is_named_in_the_note_events_and_commit_status() -> None:
    """Where Kueue's MultiKueue runs a job on a worker cluster (`LiveJobSet.placement`)."""
    from mxgitops.outputs import events
    from mxgitops.outputs.forge.wanted import wanted

    running = JobSummary("ml", "a", "unchanged", "", state="Running", placement="worker-a")
    assert "ml/a: running on cluster worker-a" in running.details()
    summary = Summary(commit="c" * 40, instance="t", jobs=(running,))
    assert "ml/a: running on cluster worker-a" in report.render_table(summary)
    assert report.parse_note(report.render_note(summary)) == summary
    (status,) = wanted(summary, limit=1)
    assert status.description == "1 running on worker-a" and status.running
    done = dataclasses.replace(running, state="Succeeded")
    (event,) = events.for_summary(dataclasses.replace(summary, jobs=(done,)), [("ml", "a")])
    assert event["note"].startswith("succeeded on cluster worker-a")
    here = dataclasses.replace(done, placement="")
    (event,) = events.for_summary(dataclasses.replace(summary, jobs=(here,)), [("ml", "a")])
    assert event["note"].startswith("succeeded (runtime")


def test_a_job_on_an_unreachable_cluster_says_so_in_the_note_status_and_commit_status() -> None:
    from mxgitops.outputs.forge.wanted import wanted

    lost = "cluster worker-a is unreachable since 2026-12-03T12:00:01Z: ..."
    running = JobSummary(
        "ml", "a", "unchanged", "", state="Running", placement="worker-a", unreachable=lost
    )
    assert f"ml/a: running on cluster worker-a: {lost}" in running.details()
    summary = Summary(commit="c" * 40, instance="t", jobs=(running,))
    assert report.parse_note(report.render_note(summary)) == summary
    (status,) = wanted(summary, limit=1)
    assert status.description == "1 running on worker-a (unreachable)"


def test_a_job_kueue_dispatched_again_to_another_cluster_says_it_runs_again() -> None:
    """Its worker lost (after Kueue's workerLostTimeout) or evicting it, Kueue runs the
    same JobSet again on another worker: the note says so while it runs there."""
    on = JobSummary("ml", "a", "unchanged", "", state="Running", runtime_id="abcde")
    before = Summary(
        commit="c" * 40, instance="t", jobs=(dataclasses.replace(on, placement="worker-a"),)
    )
    now = Summary(
        commit="c" * 40, instance="t", jobs=(dataclasses.replace(on, placement="worker-b"),)
    )
    (moved,) = report.for_note(now, before).jobs
    line = (
        "ml/a: dispatched again by Kueue, from cluster worker-a to worker-b: "
        "it runs again from the start"
    )
    assert line in moved.details()
    later = report.for_note(now, dataclasses.replace(now, jobs=(moved,)))
    assert later.jobs[0].moved_from == "worker-a"  # still there, still said
    # a note's word is not taken for what is no cluster's name, nor for another runtime
    forged = dataclasses.replace(before, jobs=(dataclasses.replace(on, placement="Evil name!"),))
    assert report.for_note(now, forged).jobs[0].moved_from == ""
    other = dataclasses.replace(
        before, jobs=(dataclasses.replace(before.jobs[0], runtime_id="zzzzz"),)
    )
    assert report.for_note(now, other).jobs[0].moved_from == ""
    assert report.for_note(now, now).jobs[0].moved_from == ""  # never moved
