"""What a sync reads: a no-op of an instance that never used JobSet is the 4 LISTs.

The ledger records the runtimes this instance may have objects of (`ledgerstore.py`,
`runtimes.unlisted`). JobSets are listed unless it positively says none can exist and
no desired job runs on JobSet; it names JobSet before the first JobSet is created, and
goes back to batch alone only after a sync that listed JobSets, found none and created
none. Neither backend serves JobSets here (404: none); tests/e2e/test_jobset.py has the
same rules with the real JobSet controller.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mxgitops.kube.reads import Reads
from mxgitops.objects import Kind
from mxgitops.runtimes.jobset.kinds import JOBSET
from mxgitops.state import ledgerstore
from tests.helpers.sync import (
    INSTANCE,
    LEDGER,
    NO_OP,
    NS,
    Syncer,
    assert_no_op,
    delete,
    lists,
    mxjob,
    recorded,
    remove,
    repo,
    requests_made,
    run,
    summary_of,
    sync_hooked,
    write,
    writes,
)
from tests.kubeapi.harness import KubeAPI

QUEUED = {"schedulingPolicy": {"queue": "training"}}  # runs on JobSet, under Kueue
JOBSETS = ("list", "jobsets")
__all__ = ["repo", "run"]  # fixtures shared with the end-to-end tests


def record(api: KubeAPI, value: str | None) -> None:
    """Set the record of runtimes by hand (None: remove it, as an earlier version wrote)."""
    found = api.get("ConfigMap", LEDGER, NS)
    assert found is not None
    data = {k: v for k, v in (found.get("data") or {}).items() if k != ledgerstore.RUNTIMES_KEY}
    if value is not None:
        data[ledgerstore.RUNTIMES_KEY] = value
    delete(api, "configmaps", LEDGER)
    labels = found["metadata"]["labels"]
    metadata = {"name": LEDGER, "labels": labels}
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}, NS)


def requests(api: KubeAPI) -> list[tuple[str, str]]:
    return requests_made(api.request_log)


def test_a_no_op_of_an_instance_that_never_ran_a_jobset_is_the_4_lists(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    write(repo, mxjob("a"), mxjob("b", servers=0))
    first = run()
    assert first.ok, first.summary
    # No ledger yet: it does not say, so JobSets are listed (none), and it records so.
    assert requests(kubeapi).count(JOBSETS) == 1
    assert recorded(kubeapi) == "batch"
    kubeapi.clear_log()
    assert run().ok
    assert_no_op(kubeapi)
    assert requests(kubeapi) == NO_OP


@pytest.mark.parametrize(
    "value",
    [None, "", "batch;jobset", "Batch", "batch,,jobset", " batch"],
    ids=["absent", "empty", "semicolon", "capital", "empty-name", "space"],
)
def test_a_ledger_that_does_not_say_lists_jobsets_then_records_batch_once(
    kubeapi: KubeAPI, repo: Path, run: Syncer, value: str | None
) -> None:
    """No record (a ledger an earlier version wrote) or one that cannot be read is never
    taken to mean "no JobSet": JobSets are listed; finding none and creating none, the
    sync writes the record (one ledger write), and the next no-op is the 4 LISTs."""
    write(repo, mxjob("a"))
    assert run().ok
    record(kubeapi, value)
    kubeapi.clear_log()
    outcome = run()
    assert outcome.ok, outcome.summary
    assert requests(kubeapi).count(JOBSETS) == 1
    unreadable = [n for n in outcome.notices if f"{ledgerstore.RUNTIMES_KEY}: " in n]
    assert bool(unreadable) == (value is not None), outcome.notices
    assert [e["path"].rsplit("/", 1)[-1] for e in writes(kubeapi) if e["resource"] != "leases"] == [
        LEDGER,
        f"mxgitops-writes-{INSTANCE}",  # the hand-off record: this sync wrote
    ]
    assert recorded(kubeapi) == "batch"
    kubeapi.clear_log()
    assert run().ok
    assert_no_op(kubeapi)


def test_a_runtime_this_version_does_not_know_is_kept_and_lists_jobsets(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    """A newer version's runtime: only it knows when its objects are gone, so it stays
    recorded, and nothing is skipped (its objects might be anywhere)."""
    write(repo, mxjob("a"))
    assert run().ok
    record(kubeapi, "batch,volcano")
    for _ in range(2):
        kubeapi.clear_log()
        assert run().ok
        assert requests(kubeapi) == [*NO_OP, JOBSETS]  # a no-op: no write
        assert recorded(kubeapi) == "batch,volcano"


def test_the_first_jobset_is_recorded_before_it_is_created(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    write(repo, mxjob("a"))
    assert run().ok
    write(repo, mxjob("a"), mxjob("q", servers=0, runPolicy=QUEUED))
    kubeapi.clear_log()
    run()  # q's JobSet is refused here (not served): what matters is the order
    log = requests(kubeapi)
    # Listed although the ledger says batch alone: a desired job runs on JobSet.
    assert log.count(JOBSETS) == 1
    recorded_at = next(
        i
        for i, e in enumerate(kubeapi.request_log)
        if e["verb"] == "update" and e["path"].endswith(f"/configmaps/{LEDGER}")
    )
    assert log.index(("create", "jobsets")) > recorded_at
    assert recorded(kubeapi) == "batch,jobset"


def test_no_jobset_is_created_when_its_record_cannot_be_written(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    write(repo, mxjob("a"))
    assert run().ok
    write(repo, mxjob("a", workers=3), mxjob("q", servers=0, runPolicy=QUEUED))
    kubeapi.faults("update/configmaps:500=1")
    kubeapi.clear_log()
    outcome = run()
    assert not outcome.ok
    assert ("create", "jobsets") not in requests(kubeapi)
    (why,) = summary_of(outcome, "q").errors
    assert why.startswith("not started: the ledger could not record that this instance may ")
    assert "batch,jobset" in why
    replaced = summary_of(outcome, "a")
    assert (replaced.action, replaced.errors) == ("replace", ())  # the batch job goes on
    kubeapi.faults("")
    assert recorded(kubeapi) == "batch"


def test_the_record_goes_back_to_batch_once_no_jobset_is_left(
    kubeapi: KubeAPI, repo: Path, run: Syncer, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(repo, mxjob("a"), mxjob("q", servers=0, runPolicy=QUEUED))
    run()
    assert recorded(kubeapi) == "batch,jobset"
    remove(repo, "q")
    kubeapi.clear_log()
    assert run().ok
    assert requests(kubeapi).count(JOBSETS) == 1  # none seen (404), none created
    # Neither backend serves JobSets: a 404 proves none gone (a CRD being reinstalled, a
    # server gone wrong), so the record stands until a LIST that answers finds none.
    assert recorded(kubeapi) == "batch,jobset"
    listed = Reads.list_all

    def served_and_empty(self: Reads, kind: Kind, *args: Any, **kwargs: Any) -> Any:
        return [] if kind is JOBSET else listed(self, kind, *args, **kwargs)

    monkeypatch.setattr(Reads, "list_all", served_and_empty)
    assert run().ok
    assert recorded(kubeapi) == "batch"
    kubeapi.clear_log()
    assert run().ok
    assert_no_op(kubeapi)


def test_a_ledger_that_now_says_jobset_makes_the_lease_holder_list_them(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    """The first read skipped JobSets (the ledger said batch alone); by the time this
    sync holds the Lease the ledger says jobset: the objects are read again, JobSets
    included, whatever the hand-off record says."""
    write(repo, mxjob("a"))
    assert run().ok
    write(repo, mxjob("a", workers=3))
    kubeapi.clear_log()
    outcome = sync_hooked(run, lambda: record(kubeapi, "batch,jobset"))
    assert outcome.ok and summary_of(outcome, "a").action == "replace"
    log = kubeapi.request_log
    assert (lists(log, "jobs"), lists(log, "jobsets")) == (2, 1)
    # It listed JobSets; their 404 (neither backend serves them) proves none gone: the
    # record stands.
    assert recorded(kubeapi) == "batch,jobset"
