"""The GitOps promises, proven over generated sequences (issue 43).

A Hypothesis state machine commits specs, reverts to earlier ones, deletes, restores and
breaks the manifest, makes a replica succeed, fail or be evicted, garbage-collects its
pods, lets a TTL pass, loses the ledger or puts back an old copy of it, cuts a sync off
part-way and runs a second sync; after every step the real sync runs (`sync.sync`, from a
Git remote, against the API double, under its Lease) and these hold:

1. a spec recorded finished is never started again unless Git names it again after a
   different spec ran to its end;
2. a running job's objects are deleted only by a plan row that says which Git change or
   which finished state caused it;
3. every live object belongs to exactly one runtime of one job, and at most one runtime
   of a job is live once a sync ends;
4. no job is counted Failed that only met disruptions, and no job re-runs without bound;
5. the note and `mxgitops status` agree with the cluster after every sync.

The model knows only what the machine made happen (which run ended, how, which pod was
evicted); it never asks the product what is right. Profiles: `ci` (the default: a fixed
budget, derandomized, no example database) and `long` (`MXGITOPS_HYPOTHESIS_PROFILE=long`,
`bench/stateful_long.py`). The JobSet runtime is not driven here: the API double serves
no JobSet and runs no JobSet controller (docs/development/index.md).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    precondition,
    rule,
    run_state_machine_as_test,
)

from mxgitops.commands.sync import SyncOutcome
from mxgitops.errors import MxGitOpsError
from mxgitops.manifests.spec import from_manifest
from mxgitops.objects import JOB_NAME_LABEL, ObjectRef
from mxgitops.outputs.summary import Summary
from mxgitops.planning.changes import Action, Change, Plan
from mxgitops.state.ledgerstore import from_config_maps
from tests.helpers.statemachine import (
    DISRUPTION_RUNS,
    DISRUPTIONS,
    EVICTIONS,
    HAS_BOUND,
    INVALID,
    JOB,
    KEEP,
    NS,
    RUNTIME_ID,
    SPEC_HASH,
    Spec,
    World,
    shifted_clock,
    summary_row,
)

__all__ = ["Machine"]

SPECS = (
    Spec("0.1"),
    Spec("0.2", restart="Never", on_change="wait"),
    Spec("0.1", on_change="wait", ttl=60),
    Spec("0.3", restart="Never", ttl=60, dist=True),
    Spec("0.2", ttl=60, backoff=2),
)
HASHES = {s: from_manifest(s.doc(), default_namespace=NS).spec_hash for s in SPECS}
FINISHED = ("Succeeded", "Failed")

settings.register_profile(
    "ci",
    max_examples=6,
    stateful_step_count=10,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile(
    "long",
    max_examples=int(os.environ.get("MXGITOPS_HYPOTHESIS_EXAMPLES", "100000")),
    stateful_step_count=30,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    print_blob=True,
)
PROFILE = os.environ.get("MXGITOPS_HYPOTHESIS_PROFILE", "ci")


@dataclass
class Run:
    """One runtime of the job, as the machine knows it."""

    runtime_id: str
    spec_hash: str
    ended: str = ""  # Succeeded or Failed: what the machine made its pods do
    disruptions: int = 0
    dist: bool = False
    failures: int = 0  # restarts and failed pods the machine made


@dataclass
class Counts:
    examples: int = 0
    syncs: int = 0  # one a step, and the first of each example


class Machine(RuleBasedStateMachine):
    root: ClassVar[Path]  # set by the test: where each example's world goes
    clock: ClassVar[Any]
    counts: ClassVar[Counts] = Counts()

    def __init__(self) -> None:
        super().__init__()
        type(self).counts.examples += 1
        self.world = World(Path(tempfile.mkdtemp(dir=self.root)))
        self.wanted: Spec | str | None = None  # in Git: a Spec, "invalid" or None (absent)
        self.texts: list[str | None] = [None]  # every a.yaml Git had, oldest first
        self.runs: dict[str, Run] = {}  # the last run of each runtime id
        self.history: list[Run] = []  # every run, oldest first
        # What invariant 1 needs of the past, oldest first: ("end", spec hash) when a run
        # ended, ("named", spec hash) when a commit named a spec.
        self.events: list[tuple[str, str]] = []
        self.rerun_after_disruption: dict[str, int] = {}  # spec hash -> consecutive re-runs
        self.ledger_copies: list[tuple[int, list[dict[str, Any]]]] = []  # (events then, maps)
        self.keep_uid = ""
        self.last_cut = False
        self.synced()

    def teardown(self) -> None:
        self.world.close()

    # -- Git ----------------------------------------------------------------------------

    def _commit(self, text: str | None, wanted: Spec | str | None, message: str) -> None:
        self.world.commit(text, message)
        self.texts.append(text)
        self.wanted = wanted
        if isinstance(wanted, Spec):
            self.events.append(("named", HASHES[wanted]))
        self.synced()

    @rule(index=st.integers(0, len(SPECS) - 1))
    def commit_spec(self, index: int) -> None:
        self._commit(SPECS[index].text(), SPECS[index], f"spec {index}")

    @precondition(lambda self: len(self.texts) > 2)
    @rule(back=st.integers(1, 8))
    def revert(self, back: int) -> None:
        """Git names an earlier manifest again (`git revert` of the commits since)."""
        earlier = self.texts[1:-1]
        text = earlier[-min(back, len(earlier))]
        wanted = next((s for s in SPECS if s.text() == text), None if text is None else "invalid")
        self._commit(text, wanted, "revert")

    @precondition(lambda self: self.wanted is not None)
    @rule()
    def delete_manifest(self) -> None:
        self._commit(None, None, "delete")

    @precondition(lambda self: self.wanted is None and any(self.texts))
    @rule()
    def restore_manifest(self) -> None:
        text = next(t for t in reversed(self.texts) if t is not None)
        wanted = next((s for s in SPECS if s.text() == text), "invalid")
        self._commit(text, wanted, "restore")

    @rule()
    def break_manifest(self) -> None:
        self._commit(INVALID, "invalid", "invalid")

    # -- the cluster --------------------------------------------------------------------

    def live_run(self) -> Run | None:
        rids = set(self.world.runtimes())
        return self.runs[next(iter(rids))] if len(rids) == 1 else None

    def running(self) -> bool:
        run = self.live_run()
        return run is not None and not run.ended and bool(self._pods(run, alive=True))

    def _pods(self, run: Run, alive: bool) -> list[dict[str, Any]]:
        pods = [
            p
            for b in self.world.batch_jobs()
            if b["metadata"]["labels"][RUNTIME_ID] == run.runtime_id
            for p in self.world.pods(b["metadata"]["name"])
        ]
        terminal = ("Succeeded", "Failed")
        return [p for p in pods if ((p.get("status") or {}).get("phase") in terminal) != alive]

    def _batch(self, run: Run, role: str) -> str | None:
        return next(
            (
                b["metadata"]["name"]
                for b in self.world.batch_jobs()
                if b["metadata"]["labels"][RUNTIME_ID] == run.runtime_id
                and b["metadata"]["labels"]["job_type"] == role
            ),
            None,
        )

    @precondition(lambda self: self.running())
    @rule()
    def replicas_succeed(self) -> None:
        run = self.live_run()
        assert run is not None
        roles = ("WORKER", "SERVER", "SCHEDULER") if run.dist else ("WORKER",)
        moved = 0
        for role in roles:
            batch = self._batch(run, role)
            if batch is not None:
                moved = self.world.finish_pods(batch, "Succeeded")
        if moved:  # the deciding replica (the scheduler, or a local job's worker) ended
            self._ended(run, "Succeeded")
        self.synced()

    @precondition(lambda self: self.running())
    @rule()
    def worker_fails(self) -> None:
        run = self.live_run()
        assert run is not None
        batch = self._batch(run, "WORKER")
        spec = next(s for s in SPECS if HASHES[s] == run.spec_hash)
        if batch is not None and self.world.finish_pods(batch, "Failed", exit_code=1):
            run.failures += 1
            # Under OnFailure it restarts in place, until backoffLimit restarts.
            if spec.restart == "Never" or run.failures == spec.backoff:
                self._ended(run, "Failed")
        self.synced()

    @precondition(lambda self: self.running())
    @rule(which=st.integers(0, 3), how=st.sampled_from(sorted(EVICTIONS)), gone=st.booleans())
    def pod_evicted(self, which: int, how: str, gone: bool) -> None:
        """A pod is taken away: a disruption, unless Kubernetes records none (its node
        failed it) or says the pod used more than it requested (the job's failure). With
        `gone`, the pod is deleted before the sync sees it (an eviction deletes it; the
        pod garbage collector or a clean-up script may be faster than the sync)."""
        run = self.live_run()
        assert run is not None
        pods = sorted(p["metadata"]["name"] for p in self._pods(run, alive=True))
        pod = pods[which % len(pods)]
        self.world.evict(pod, how)
        if gone:
            self.world.delete_pod(pod)
        if how in DISRUPTIONS:
            run.disruptions += 1
        else:
            self._ended(run, "Failed")
        self.synced()

    def _collectable(self) -> list[str]:
        """Pods of the job the garbage collector or a clean-up script may take: ended, or
        restarted after a failure."""
        run = self.live_run()
        if run is None:
            return []
        return sorted(
            p["metadata"]["name"]
            for p in self._pods(run, alive=False) + self._pods(run, alive=True)
            if (p.get("status") or {}).get("phase") in FINISHED
            or any(
                cs.get("restartCount", 0) for cs in p.get("status", {}).get("containerStatuses", [])
            )
        )

    @precondition(lambda self: bool(self._collectable()))
    @rule(which=st.integers(0, 3))
    def pod_collected(self, which: int) -> None:
        pods = self._collectable()
        self.world.delete_pod(pods[which % len(pods)])
        self.synced()

    @rule()
    def ttl_passes(self) -> None:
        self.world.advance(self.clock, 3600)
        self.synced()

    # -- the ledger ---------------------------------------------------------------------

    def _forget_unless_live(self, recorded: tuple[int, str] | None = None) -> None:
        """Deleting the ledger makes a finished job whose objects are gone run again
        (docs/concepts/ledger.md): the model remembers what the cluster still shows, and
        what the restored copy (`recorded`: when it was taken, and its spec) says."""
        live = self.live_run()
        shown = live.spec_hash if live is not None and live.ended else None
        events = [e for e in self.events if e[0] == "named" or e[1] == shown]
        if recorded is not None:
            then, spec_hash = recorded
            kept = sum(1 for e in self.events[:then] if e in events)
            events.insert(kept, ("end", spec_hash))
        self.events = events

    def finished(self, spec_hash: str) -> bool:
        """Invariant 1's rule: `spec_hash` ran to its end, and Git has not named it again
        since a different spec ran to its end."""
        ends = [i for i, e in enumerate(self.events) if e == ("end", spec_hash)]
        if not ends:
            return False
        later = self.events[ends[-1] + 1 :]
        other = next(
            (i for i, (kind, h) in enumerate(later) if kind == "end" and h != spec_hash), None
        )
        return other is None or ("named", spec_hash) not in later[other + 1 :]

    @rule()
    def ledger_lost(self) -> None:
        self.world.lose_ledger()
        self._forget_unless_live()
        self.synced()

    @precondition(lambda self: len(self.ledger_copies) > 1)
    @rule(back=st.integers(1, 8))
    def ledger_stale(self, back: int) -> None:
        older = self.ledger_copies[:-1]
        then, copies = older[-min(back, len(older))]
        self.world.restore_ledger(copies)
        entry = from_config_maps(copies).entries.get((NS, JOB)) if copies else None
        self._forget_unless_live(None if entry is None else (then, entry.spec_hash))
        self.synced()

    # -- syncs --------------------------------------------------------------------------

    @rule(writes=st.integers(0, 3))
    def sync_cut_off(self, writes: int) -> None:
        self.synced(cut_after=writes)

    @precondition(lambda self: not self.last_cut)  # after a cut, the next sync finishes it
    @rule()
    def second_sync(self) -> None:
        """Another sync with nothing changed since the last: it starts and stops nothing."""
        outcome = self.synced(controllers=False)
        assert outcome is not None
        moved = [c for c in outcome.plan.changes if c.creates or c.deletes]
        assert not moved, f"a sync right after a sync wrote {rows(moved)}"

    # -- one sync and the invariants after it ---------------------------------------------

    def _ended(self, run: Run, state: str) -> None:
        run.ended = state
        self.events.append(("end", run.spec_hash))

    def synced(self, cut_after: int | None = None, controllers: bool = True) -> SyncOutcome | None:
        counts = type(self).counts
        counts.syncs += 1
        self.last_cut = cut_after is not None
        before = {o["metadata"]["uid"]: o for o in self.world.ours("jobs")}
        planned: Plan | None = None
        outcome: SyncOutcome | None = None
        if cut_after is None:
            outcome = self.world.sync()
            planned = outcome.plan
        else:
            # What the cut sync set out to do: the same plan, read from the same state.
            planned = self.world.sync(dry_run=True).plan
            with contextlib.suppress(MxGitOpsError):  # stopped: what it wrote stands
                outcome = self.world.sync(cut_after=cut_after)  # its rows say what was not
                planned = outcome.plan
        self.check_deletes(before, planned)  # by the runs as they were before the sync
        self.check_starts(before, planned)
        self.check_ownership()
        pruned = any(c.name == JOB and c.action is Action.DELETE for c in planned.changes)
        if pruned and self.wanted is None and not self.world.batch_jobs():
            # The ledger forgets a job whose manifest went once its prune went through
            # (docs/concepts/ledger.md): it is a new job if the manifest comes back.
            self.events = [e for e in self.events if e[0] != "end"]
        if outcome is not None:
            self.check_note(outcome)
            self.check_disruptions(outcome)
            self.ledger_copies.append((len(self.events), self.world.ledger_maps()))
        if controllers:
            self.world.controllers()
        return outcome

    def check_starts(self, before: dict[str, Any], planned: Plan) -> None:
        """Invariant 1 (and the bound of invariant 4). A runtime id is a hash of the spec,
        so a run of a spec again has the ids of the last: a new run is one whose objects
        are all new."""
        now = {o["metadata"]["uid"]: o for o in self.world.ours("jobs")}
        made: dict[str, Run] = {}
        for uid, obj in now.items():
            labels, annotations = obj["metadata"]["labels"], obj["metadata"]["annotations"]
            if uid in before or labels[JOB_NAME_LABEL] != JOB:
                continue
            rid, spec_hash = labels[RUNTIME_ID], annotations[SPEC_HASH]
            kept = [
                u
                for u, o in before.items()
                if u in now and o["metadata"]["labels"][RUNTIME_ID] == rid
            ]
            if not kept and rid not in made:
                dist = "SCHEDULER" in annotations.get("mxgitops.io/replicas", "")
                made[rid] = self.runs[rid] = Run(rid, spec_hash, dist=dist)
                self.history.append(made[rid])
            assert not self.finished(spec_hash), (
                f"{obj['metadata']['name']} created for spec {spec_hash[:8]}, which ran to its "
                f"end, not named again since another spec did: {rows(planned.changes)}"
            )
        for run in made.values():
            self._count_rerun(run)

    def _count_rerun(self, new: Run) -> None:
        last = self.history[-2] if len(self.history) > 1 else None
        if last is not None and last.spec_hash == new.spec_hash and last.disruptions:
            self.rerun_after_disruption[new.spec_hash] = (
                self.rerun_after_disruption.get(new.spec_hash, 0) + 1
            )
        else:
            self.rerun_after_disruption[new.spec_hash] = 0
        runs = self.rerun_after_disruption[new.spec_hash]
        assert runs <= DISRUPTION_RUNS, (
            f"spec {new.spec_hash[:8]} run again {runs} times in a row after disruptions"
        )

    def check_deletes(self, before: dict[str, Any], planned: Plan) -> None:
        """Invariant 2: a running run's objects go only by a row with a cause."""
        now = {o["metadata"]["uid"] for o in self.world.ours("jobs")}
        for uid, obj in before.items():
            labels = obj["metadata"]["labels"]
            if uid in now or labels[JOB_NAME_LABEL] != JOB:
                continue
            run = self.runs[labels[RUNTIME_ID]]
            if run.ended:
                continue
            ref = ObjectRef.of(obj)
            row = next((c for c in planned.changes if ref in c.deletes), None)
            assert row is not None, f"running {ref} deleted with no row: {rows(planned.changes)}"
            assert row.reason.strip(), f"{ref} deleted by a row without a reason"
            cause = self._cause(row, run)
            assert cause, (
                f"running {ref} (spec {run.spec_hash[:8]}, {run.disruptions} disruptions) "
                f"deleted by {rows([row])} with Git wanting {self._wanted_name()}"
            )

    def _cause(self, row: Change, run: Run) -> bool:
        """Whether a change may delete the objects of `run`, which has not ended: a
        disruption ran it again, the manifest went (prune), or Git names another spec
        and the manifest says `on-change: replace`. An invalid manifest, `on-change:
        wait` and a TTL (of another run) never may."""
        if run.disruptions:
            return True
        wanted = self.wanted
        if wanted is None:
            return row.action is Action.DELETE
        if isinstance(wanted, Spec) and HASHES[wanted] != run.spec_hash:
            stops = (Action.REPLACE, Action.DELETE, Action.STOP)
            return row.action in stops and wanted.on_change == "replace"
        return False

    def _wanted_name(self) -> str:
        wanted = self.wanted
        return repr(wanted) if not isinstance(wanted, Spec) else f"{wanted} {HASHES[wanted][:8]}"

    def check_ownership(self) -> None:
        """Invariant 3."""
        by_job: dict[str, set[str]] = {}
        for plural in ("jobs", "services"):
            for obj in self.world.managed(plural):
                meta = obj["metadata"]
                job, rid = meta["labels"].get(JOB_NAME_LABEL), meta["labels"].get(RUNTIME_ID)
                assert job in (JOB, KEEP) and rid, f"{plural}/{meta['name']} is no job's"
                assert re.match(rf"{job}-[a-z]+-{rid}(-\d+)?$", meta["name"]), meta["name"]
                by_job.setdefault(job, set()).add(rid)
                if job == KEEP and plural == "jobs":
                    assert self.keep_uid in ("", meta["uid"]), "the untouched job was replaced"
                    self.keep_uid = meta["uid"]
        for job, rids in by_job.items():
            assert len(rids) == 1, f"{job} has {len(rids)} runtimes live: {sorted(rids)}"

    def check_note(self, outcome: SyncOutcome) -> None:
        """Invariant 5: the note is the sync's summary, `status` shows it, and both say
        what the cluster holds."""
        assert not outcome.note_error, outcome.note_error
        sha = outcome.workspace.commit
        note, status = self.world.note(sha), self.world.status(sha)
        assert note is not None and status is not None
        # An unchanged job's row keeps its last real action (report.for_note): the
        # states, runtimes and specs are what must agree.
        assert facts(note) == facts(outcome.summary) == facts(status)
        row = summary_row(note)
        live = self.live_run()
        if live is None:
            assert not self.world.runtimes(), "two runtimes live"
            wanted = self.wanted
            if isinstance(wanted, Spec) and self.finished(HASHES[wanted]):
                ended = next(
                    r.ended for r in reversed(self.history) if r.spec_hash == HASHES[wanted]
                )
                assert row is not None and row.state == ended, (row, ended)
            return
        assert row is not None, f"no row for {JOB}, whose runtime {live.runtime_id} is live"
        assert row.runtime_id == live.runtime_id, (row.runtime_id, live.runtime_id)
        if live.ended == "Succeeded":
            assert row.state == "Succeeded", (row.state, row.reason)
        elif live.ended == "Failed":
            assert row.state == "Failed", (row.state, row.reason)

    def check_disruptions(self, outcome: SyncOutcome) -> None:
        """Invariant 4: Failed only for a failure the machine made, or at the bound."""
        row = summary_row(outcome.summary)
        live = self.live_run()
        if row is None or row.state != "Failed" or live is None or live.ended == "Failed":
            return
        said = f"{row.reason} {row.failure}".lower()
        runs = self.rerun_after_disruption.get(live.spec_hash, 0)
        assert "disrupt" in said and runs >= DISRUPTION_RUNS and HAS_BOUND, (
            f"{JOB} read Failed after {live.disruptions} disruptions and no failure: {said}"
        )


def facts(summary: Summary) -> list[tuple[str, str, str, str]]:
    return [(j.name, j.state, j.runtime_id, j.spec_hash) for j in summary.jobs]


def rows(changes: Any) -> str:
    return "; ".join(
        f"{c.name} {c.action.value} (+{len(c.creates)} -{len(c.deletes)}): {c.reason}"
        for c in changes
    )


@pytest.fixture
def machine_root(
    tmp_path: Path, git_isolation: None, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    with shifted_clock(monkeypatch) as clock:
        Machine.root, Machine.clock, Machine.counts = tmp_path, clock, Counts()
        yield tmp_path


# The ci profile takes about 40 s alone on two cores; under CI's three workers, longer.
@pytest.mark.timeout(300)
def test_the_invariants_hold_over_generated_sequences(machine_root: Path) -> None:
    run_state_machine_as_test(Machine, settings=settings.get_profile(PROFILE))
    counts = Machine.counts
    print(f"\nstate machine ({PROFILE}): {counts.examples} examples, {counts.syncs} syncs")


# -- sequences the machine found, kept ----------------------------------------------------


def replay(*steps: tuple[str, dict[str, Any]]) -> None:
    """Run the machine through `steps`, as Hypothesis prints a failing case."""
    machine = Machine()
    try:
        for name, arguments in steps:
            getattr(machine, name)(**arguments)
    finally:
        machine.teardown()


def test_a_revert_to_a_finished_spec_starts_nothing_and_stops_nothing(machine_root: Path) -> None:
    replay(
        ("commit_spec", {"index": 1}),  # H1, on-change wait, runs
        ("replicas_succeed", {}),  # H1 ran to its end: recorded
        ("commit_spec", {"index": 2}),  # H2 starts
        ("commit_spec", {"index": 1}),  # Git names H1 again while H2 runs
    )


def test_a_failed_pod_collected_under_on_failure_stays_a_failure(machine_root: Path) -> None:
    replay(
        ("commit_spec", {"index": 0}),  # OnFailure, no backoffLimit
        # No disruption recorded, and the pod garbage collector deletes the pod.
        ("pod_evicted", {"which": 0, "how": "node failed it", "gone": True}),
        ("second_sync", {}),
    )


def test_disruptions_run_a_job_again_a_bounded_number_of_times(machine_root: Path) -> None:
    evicted = ("pod_evicted", {"which": 0, "how": "preempted", "gone": False})
    replay(("commit_spec", {"index": 1}), evicted, evicted, evicted, ("second_sync", {}))


def test_a_revert_to_a_failed_spec_stops_the_run_in_between_and_starts_nothing(
    machine_root: Path,
) -> None:
    """Found by the long profile on the code before the fix (shrunk by hand)."""
    replay(
        ("commit_spec", {"index": 3}),  # H1: dist, Never, on-change: replace
        ("worker_fails", {}),  # H1 Failed
        ("commit_spec", {"index": 0}),  # H2 runs
        ("revert", {"back": 2}),  # Git names H1 again while H2 runs
    )


def test_a_ttl_never_takes_a_running_job(machine_root: Path) -> None:
    replay(
        ("commit_spec", {"index": 2}),  # H1, on-change wait, ttlSecondsAfterFinished 60
        ("replicas_succeed", {}),
        ("commit_spec", {"index": 1}),  # H2 starts
        ("commit_spec", {"index": 2}),  # Git names H1 again
        ("ttl_passes", {}),
    )
