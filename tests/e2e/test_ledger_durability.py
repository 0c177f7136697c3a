"""Finished jobs are never forgotten: the ledger under hostile trees, damage and scale.

End to end against the API double (plain directories, or a bare Git remote over
file:// where history is rewritten). A job "runs again" when a sync POSTs its
batch Jobs after it finished and its objects were deleted (as by a TTL); every
test asserts on the double's request log that this never happens.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.commands.sync import SyncOutcome, sync
from mxgitops.errors import StateDamagedError
from mxgitops.kube import cluster, lease
from mxgitops.objects import LiveObjects, ownership_labels
from mxgitops.planning.ledger import Finished, Ledger
from mxgitops.settings.config import SyncConfig
from mxgitops.state import ledgerstore
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.sync import (
    INSTANCE,
    NS,
    RETRY,
    ROW,
    Syncer,
    delete,
    finish,
    job_objects,
    mxjob,
    remove,
    repo,
    requests_made,
    run,
    summary_of,
    write,
    writes,
)
from tests.kubeapi.harness import KubeAPI

LEDGER = f"mxgitops-ledger-{INSTANCE}"
__all__ = ["repo", "run"]  # fixtures shared with the end-to-end tests


def expire(api: KubeAPI, *jobs: str) -> None:
    """What ttlSecondsAfterFinished does: the finished job's objects go."""
    for job in jobs:
        for kind in ("jobs", "services"):
            for obj in job_objects(api, job, kind):
                delete(api, kind, obj["metadata"]["name"])
        assert not job_objects(api, job)


def job_posts(api: KubeAPI) -> list[str]:
    return [e["path"] for e in writes(api) if e["method"] == "POST" and e["resource"] == "jobs"]


def book(api: KubeAPI) -> Ledger:
    shards = [
        o
        for o in api.objects("configmaps", NS)
        if ledgerstore.is_shard(o["metadata"]["name"], INSTANCE)
    ]
    return ledgerstore.from_config_maps(shards)


def finished_and_expired(api: KubeAPI, run: Callable[[], SyncOutcome], *jobs: str) -> None:
    """Sync the jobs, let them succeed, record them, and let the TTL take their objects."""
    run()
    for job in jobs:
        finish(api, job, "worker")
    run()
    assert set(book(api).entries) == {(NS, j) for j in jobs}
    expire(api, *jobs)


# -- entries survive what is not a deletion --------------------------------------------


def test_a_yaml_typo_then_the_fix_reruns_nothing(kubeapi: KubeAPI, repo: Path, run: Syncer) -> None:
    write(repo, mxjob("once", servers=0), mxjob("other", servers=0))
    finished_and_expired(kubeapi, run, "once")
    good = (repo / "once.yaml").read_text()
    (repo / "once.yaml").write_text(good.replace("kind: MXJob", "kind: MXJob\n  : ["))
    kubeapi.clear_log()
    broken = run()
    assert broken.summary.problems
    assert (NS, "once") in book(kubeapi).entries
    (repo / "once.yaml").write_text(good)
    kubeapi.clear_log()
    fixed = run()
    assert not job_posts(kubeapi)
    assert (summary_of(fixed, "once").action, summary_of(fixed, "once").state) == (
        "unchanged",
        "Succeeded",
    )
    assert not book(kubeapi).entries[(NS, "once")].unseen_since


def test_an_invalid_manifest_keeps_the_entry(kubeapi: KubeAPI, repo: Path, run: Syncer) -> None:
    write(repo, mxjob("once", servers=0))
    finished_and_expired(kubeapi, run, "once")
    bad = mxjob("once", servers=0)
    bad["spec"]["mxReplicaSpecs"]["Worker"]["replicas"] = "many"
    write(repo, bad)
    assert run().summary.problems
    write(repo, mxjob("once", servers=0))
    kubeapi.clear_log()
    run()
    assert not job_posts(kubeapi)


def test_a_tiny_max_file_size_reruns_nothing(kubeapi: KubeAPI, repo: Path, run: Syncer) -> None:
    big = mxjob("once", servers=0, annotations={"note": "x" * 2000})
    write(repo, big)
    finished_and_expired(kubeapi, run, "once")
    assert run(max_file_size=1024).summary.problems  # the file is reported, not read
    kubeapi.clear_log()
    run()
    assert not job_posts(kubeapi)


def test_a_force_push_to_a_tree_without_manifests_and_back_reruns_nothing(
    kubeapi: KubeAPI, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    files = {f"jobs/{n}.yaml": yaml.safe_dump(mxjob(n, servers=0)) for n in ("a", "b", "c")}
    remote = make_git_remote("jobs", files=files)
    good = remote.rev()
    connect = functools.partial(cluster.connect, retry=RETRY, sleep=lambda _: None)

    def run() -> SyncOutcome:
        config = SyncConfig(
            repo=remote.url,
            path="jobs",
            namespace=NS,
            instance=INSTANCE,
            cache_dir=tmp_path / "cache",
            kubeconfig=kubeapi.kubeconfig,
        )
        return sync(config, explicit=frozenset({"namespace", "instance"}), connect=connect)

    run()
    for job in ("a", "b", "c"):
        finish(kubeapi, job, "worker")
    run()
    expire(kubeapi, "a", "b")  # c's objects are still there
    # Force-push a history whose tree has no manifests at all.
    remote.git("checkout", "--quiet", "--orphan", "wiped")
    remote.git("rm", "--quiet", "-r", "-f", ".")
    (remote.work / "jobs").mkdir()
    (remote.work / "jobs" / "README.md").write_text("nothing here\n")
    remote.git("add", "--all")
    remote.git("commit", "--quiet", "-m", "wiped")
    remote.push(force=True)
    emptied = run()
    assert emptied.summary.prune_refused  # c is live: pruning everything is refused
    assert set(book(kubeapi).entries) == {(NS, "a"), (NS, "b"), (NS, "c")}
    remote.git("reset", "--quiet", "--hard", good)
    remote.push(force=True)
    kubeapi.clear_log()
    restored = run()
    assert not job_posts(kubeapi)
    assert {j.name: j.state for j in restored.summary.jobs} == dict.fromkeys("abc", "Succeeded")


def test_an_entry_goes_only_when_the_prune_went_through(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    write(repo, mxjob("done", servers=0), mxjob("k1", servers=0), mxjob("k2", servers=0))
    run()
    finish(kubeapi, "done", "worker")
    run()
    remove(repo, "done")
    kubeapi.faults("delete/jobs:500=1")
    failed = run()
    assert failed.changeset is not None and failed.changeset.failed
    assert (NS, "done") in book(kubeapi).entries  # its objects are still there
    kubeapi.faults("")
    pruned = run()
    assert pruned.ok and summary_of(pruned, "done").action == "delete"
    assert (NS, "done") not in book(kubeapi).entries
    assert not job_objects(kubeapi, "done")


# -- scale: shards, never a dropped entry -------------------------------------------


def entries(count: int, *, unseen: str = "") -> dict[tuple[str, str], Finished]:
    made = (
        Finished(NS, f"job-{i:06d}", f"{i:064x}", "Succeeded", "2026-01-01T00:00:00+00:00", unseen)
        for i in range(count)
    )
    return {e.key: e for e in made}


# Entries no manifest names, well within the retention (which is measured from now).
RECENTLY = datetime.now(UTC).isoformat(timespec="seconds")


def seed(api: KubeAPI, book_: Ledger) -> None:
    for obj in ledgerstore.to_config_maps(book_, instance=INSTANCE, namespace=NS):
        api.create(obj, NS)


def test_shards_hold_every_entry_and_the_layout_only_grows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ledgerstore, "MAX_BYTES", 8 * 1024)
    many = entries(1_000)
    objs = ledgerstore.to_config_maps(Ledger(many), instance=INSTANCE, namespace=NS)
    assert len(objs) >= 16 and len(objs) & (len(objs) - 1) == 0  # a power of two
    assert all(len(o["data"][ledgerstore.DATA_KEY].encode()) <= 8 * 1024 for o in objs)
    assert [o["metadata"]["name"] for o in objs[:2]] == [LEDGER, f"{LEDGER}.1"]
    read = ledgerstore.from_config_maps(objs)
    assert read.entries == many and read.shards == len(objs)
    fewer = ledgerstore.to_config_maps(
        read.with_entries(entries(10)), instance=INSTANCE, namespace=NS
    )
    assert len(fewer) == len(objs)  # no shard is left behind with stale rows


def test_a_layout_change_cut_short_loses_nothing() -> None:
    """Entries in two shards (new written, old not yet trimmed): the newest wins."""
    old = Finished(NS, "a", "h1", "Succeeded", "2026-01-01T00:00:00+00:00")
    new = Finished(NS, "a", "h2", "Failed", "2026-02-01T00:00:00+00:00")
    first = ledgerstore.to_config_maps(Ledger({old.key: old}), instance=INSTANCE, namespace=NS)[0]
    second = ledgerstore.to_config_maps(Ledger({new.key: new}), instance=INSTANCE, namespace=NS)[0]
    second["metadata"]["name"] = f"{LEDGER}.1"
    assert ledgerstore.from_config_maps([first, second]).entries == {new.key: new}
    assert ledgerstore.from_config_maps([second, first]).entries == {new.key: new}


def test_one_more_finished_job_beyond_a_full_config_map_drops_nothing(
    kubeapi: KubeAPI, repo: Path, run: Syncer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledgerstore, "MAX_BYTES", 16 * 1024)
    seed(kubeapi, Ledger(entries(80, unseen=RECENTLY)))
    write(repo, mxjob("last", servers=0))
    run()
    finish(kubeapi, "last", "worker")
    run()
    kept = book(kubeapi)
    assert len(kept.entries) == 81 and kept.shards > 1
    kubeapi.clear_log()
    run()  # a no-op, however many shards (bench/bench_ledger.py: 100,000 jobs)
    # No JobSet LIST: the ledger records that this instance never had one.
    assert requests_made(kubeapi.request_log) == [
        ("list", "configmaps"),
        ("list", "jobs"),
        ("list", "services"),
        ("list", "pods"),
    ]


# -- damage is reported, never guessed at ----------------------------------------------


def damage(api: KubeAPI, text: str) -> None:
    delete(api, "configmaps", LEDGER)
    api.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": LEDGER, "labels": ownership_labels(INSTANCE)},
            "data": {ledgerstore.DATA_KEY: text},
        },
        NS,
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[{"namespace": "ml",', "Expecting"),
        (json.dumps([{**ROW, "colour": "red"}]), "unknown field 'colour'"),
        (json.dumps([{**ROW, "state": "Running"}]), "not a finished one"),
        (json.dumps({"once": ROW}), "not a list"),
    ],
)
def test_a_damaged_ledger_stops_the_sync_before_any_write(
    kubeapi: KubeAPI, repo: Path, run: Syncer, text: str, problem: str
) -> None:
    write(repo, mxjob("once", servers=0), mxjob("other", servers=0))
    finished_and_expired(kubeapi, run, "once")
    damage(kubeapi, text)
    kubeapi.clear_log()
    with pytest.raises(StateDamagedError, match=problem) as caught:
        run()
    assert not writes(kubeapi)
    message = str(caught.value)
    assert "\n" not in message
    assert f"kubectl -n {NS} edit configmap {LEDGER}" in message
    result = CliRunner().invoke(
        main,
        [
            *("sync", "--repo", str(repo), "--kubeconfig", str(kubeapi.kubeconfig)),
            *("--namespace", NS, "--instance", INSTANCE, "--no-notes"),
        ],
    )
    assert result.exit_code == 6, result.output
    assert result.output.startswith("Error: the ledger ConfigMap")
    assert not job_posts(kubeapi)


def test_a_lease_without_spec_is_free_as_kube_apiserver_serves_it(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    """kube-apiserver stores a Lease created without spec with `spec: {}`: nobody holds
    it. Read so on both backends, it is taken over (it ended every sync with exit 70)."""
    write(repo, mxjob("a", servers=0))
    kubeapi.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": f"mxgitops-{INSTANCE}"},
        },
        NS,
    )
    assert summary_of(run(), "a").action == "create"
    stored = kubeapi.get("Lease", f"mxgitops-{INSTANCE}", NS)
    assert stored is not None and stored["spec"]["leaseTransitions"] == 1
    assert not stored["spec"].get("holderIdentity")


@pytest.mark.parametrize(
    ("spec", "problem"),
    [("held", "spec is not a mapping"), ({"leaseDurationSeconds": "600"}, "not a whole number")],
)
def test_a_lease_that_cannot_be_read_is_reported_with_its_repair(
    spec: object, problem: str
) -> None:
    from tests.helpers.lease import REF, FakeLeases

    api = FakeLeases()
    api.objects[REF] = {"kind": "Lease", "metadata": {"name": REF.name, "namespace": "ml"}}
    api.objects[REF]["spec"] = spec
    with pytest.raises(StateDamagedError, match=problem) as caught:
        lease.take(api, instance="t1", namespace="ml", holder="me/1")
    assert "kubectl -n ml delete lease mxgitops-t1" in str(caught.value)
    assert api.writes == []


# -- lost responses ----------------------------------------------------------------------


def test_a_lost_response_to_the_lease_create_is_recognised(kubeapi: KubeAPI, repo: Path) -> None:
    write(repo, mxjob("a", servers=0))
    kubeapi.faults("create/leases:lose=1")
    run = Syncer(kubeapi, repo)
    run.sleeps = _Lift(kubeapi)
    outcome = run()
    assert outcome.ok and summary_of(outcome, "a").action == "create"
    posts = [(e["status"], e["fault"]) for e in kubeapi.request_log if e["resource"] == "leases"]
    assert posts[:3] == [(404, None), (201, "lose"), (409, None)]
    stored = kubeapi.get("Lease", f"mxgitops-{INSTANCE}", NS)
    assert stored is not None and not stored["spec"].get("holderIdentity")  # released
    write(repo, mxjob("b", servers=0))
    assert summary_of(run(), "b").action == "create"  # the next sync is not locked out


def test_a_lost_response_to_the_ledger_create_does_not_fail_the_sync(
    kubeapi: KubeAPI, repo: Path
) -> None:
    """The first sync creates the ledger (recording the runtimes this instance uses)."""
    write(repo, mxjob("once", servers=0))
    run = Syncer(kubeapi, repo)
    kubeapi.faults("create/configmaps:lose=1")
    run.sleeps = _Lift(kubeapi)
    outcome = run()
    assert outcome.ok, outcome.changeset
    created = [e for e in kubeapi.request_log if (e["verb"], e["resource"]) == CREATE_CM]
    # The ledger (its response lost), the retry met by a 409 and recognised as this
    # sync's own write, then the hand-off record.
    assert [e["status"] for e in created] == [201, 409, 201]
    assert book(kubeapi).runtimes == {"batch"}
    finish(kubeapi, "once", "worker")
    assert run().ok
    assert set(book(kubeapi).entries) == {(NS, "once")}


def test_a_lost_response_to_a_ledger_replace_or_a_lease_take_over_is_recognised(
    kubeapi: KubeAPI, repo: Path
) -> None:
    write(repo, mxjob("one", servers=0), mxjob("two", servers=0))
    run = Syncer(kubeapi, repo)
    run()
    finish(kubeapi, "one", "worker")
    run()  # the ledger exists now
    finish(kubeapi, "two", "worker")
    run.sleeps = _Lift(kubeapi)
    kubeapi.faults("update/configmaps:lose=1")
    kubeapi.clear_log()
    assert run().ok
    lost = [
        (e["verb"], e["resource"], e["status"], e["fault"])
        for e in kubeapi.request_log
        if LEDGER in e["path"] or e["resource"] != "configmaps"  # not the hand-off record
    ]
    assert [e for e in lost if e[:2] == ("update", "configmaps")] == [
        ("update", "configmaps", 200, "lose"),
        ("update", "configmaps", 409, None),
    ]
    assert set(book(kubeapi).entries) == {(NS, "one"), (NS, "two")}

    write(repo, mxjob("three", servers=0))
    kubeapi.faults("update/leases:lose=1")  # taking the released Lease over
    kubeapi.clear_log()
    assert run().ok
    updates = [
        (e["status"], e["fault"])
        for e in kubeapi.request_log
        if e["verb"] == "update" and e["resource"] == "leases"
    ]
    assert updates == [(200, "lose"), (409, None), (200, None)]  # take-over, retry, release
    stored = kubeapi.get("Lease", f"mxgitops-{INSTANCE}", NS)
    assert stored is not None and not stored["spec"].get("holderIdentity")


CREATE_CM = ("create", "configmaps")


class _Lift(list[float]):
    """The retry policy's sleep (it appends): lifts every fault before the retry, so a
    response lost once is followed by a retry that meets the server's 409."""

    def __init__(self, api: KubeAPI) -> None:
        super().__init__()
        self._api = api

    def append(self, seconds: float) -> None:
        self._api.faults("")
        super().append(seconds)


# -- the planner's ledger decisions, each with a reason ---------------------------------


def test_retention_starts_when_nothing_names_a_job_and_forgets_only_after_it() -> None:
    from mxgitops.planning.bookkeeping import LedgerAction
    from mxgitops.planning.changes import PlanOptions
    from mxgitops.planning.plan import plan
    from tests.helpers.jobs import OPTIONS

    gone = Finished(NS, "gone", "h", "Succeeded", "2025-01-01T00:00:00+00:00")
    first = plan([], LiveObjects(), Ledger({gone.key: gone}), OPTIONS)
    (change,) = first.ledger_changes
    assert change.action is LedgerAction.UNSEEN and "forgotten after 90 days" in change.reason
    marked = first.ledger.entries[gone.key]
    assert marked.unseen_since == "2026-01-02T03:04:05+00:00"

    start = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    later = dataclasses.replace(OPTIONS, now=start + timedelta(days=89))
    assert not plan([], LiveObjects(), first.ledger, later).ledger_changed
    expired = dataclasses.replace(OPTIONS, now=start + timedelta(days=91))
    forgot = plan([], LiveObjects(), first.ledger, expired)
    assert [c.action for c in forgot.ledger_changes] == [LedgerAction.FORGET]
    assert forgot.ledger.entries == {}

    # Named again (here by an invalid manifest) before then: the retention stops.
    back = plan([], LiveObjects(), first.ledger, later, invalid=frozenset({gone.key}))
    assert [c.action for c in back.ledger_changes] == [LedgerAction.SEEN]
    assert back.ledger.entries[gone.key].unseen_since == ""
    short = PlanOptions(instance="t1", now=OPTIONS.now, ledger_retention=timedelta(days=1))
    (marking,) = plan([], LiveObjects(), Ledger({gone.key: gone}), short).ledger_changes
    assert "after 1 days" in marking.reason


def test_a_pruned_job_is_forgotten_unless_its_prune_failed() -> None:
    from mxgitops.planning.bookkeeping import LedgerAction
    from mxgitops.planning.changes import Action
    from mxgitops.planning.plan import plan
    from tests.helpers.jobs import OPTIONS, job, live

    done, other = job("done"), job("other")
    entry = Finished(NS, "done", done.spec_hash, "Succeeded", "2026-01-01T00:00:00+00:00")
    result = plan([other], live(done, other), Ledger({entry.key: entry}), OPTIONS)
    assert {c.name: c.action for c in result.changes}["done"] is Action.DELETE
    (forget,) = result.ledger_changes
    assert forget.action is LedgerAction.FORGET and "pruned" in forget.reason
    assert result.ledger.entries == {}
    assert result.ledger_after(set()).entries == {}
    assert result.ledger_after({entry.key}).entries == {entry.key: entry}


def test_every_ledger_change_is_logged_with_its_reason(
    kubeapi: KubeAPI,
    repo: Path,
    run: Syncer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logger = logging.getLogger("mxgitops")  # as before any CLI run configured it
    monkeypatch.setattr(logger, "propagate", True)
    monkeypatch.setattr(logger, "handlers", [])
    write(repo, mxjob("once", servers=0), mxjob("other", servers=0))
    run()
    finish(kubeapi, "once", "worker")
    with caplog.at_level("INFO", logger="mxgitops"):
        run()
        remove(repo, "once")
        run()
    ledger_lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ledger")]
    assert ledger_lines == [
        f"ledger: record {NS}/once: seen succeeded",
        f"ledger: forget {NS}/once: manifest removed and its objects pruned",
    ]
