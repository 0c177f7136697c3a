"""End to end: a commit that reverts a job to a spec the ledger records finished, while
a run of the spec in between is live. `sync()` against the API server (the double, or the
real control plane), with the job controller and kubelet stepped by the test.

The finished spec is not started again; the run Git no longer names runs to its end
under `on-change: wait`, or is stopped, and nothing starts after it; the finished spec's
ttlSecondsAfterFinished, long passed, deletes nothing of a run that is not its own."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mxgitops.planning import ledger
from mxgitops.state import ledgerstore
from tests.helpers.sync import (
    INSTANCE,
    NS,
    Syncer,
    finish,
    job_objects,
    mxjob,
    read_shard,
    repo,
    run,
    summary_of,
    write,
)
from tests.kubeapi.clients import raw
from tests.kubeapi.harness import KubeAPI

__all__ = ["repo", "run"]  # fixtures from tests/helpers, used here

WAIT = {"mxgitops.io/on-change": "wait"}
TTL = {"ttlSecondsAfterFinished": 60}
LEDGER = f"mxgitops-ledger-{INSTANCE}"


def spec(epochs: int, *, wait: bool) -> dict[str, object]:
    return mxjob(
        "rev",
        args=["train.py", f"--epochs={epochs}"],
        annotations=WAIT if wait else None,
        runPolicy=TTL,
    )


def backdate_the_record(api: KubeAPI, hours: int) -> ledger.Finished:
    """The sync that recorded the job finished ran `hours` ago: its TTL has long passed.
    (Its objects are gone by then: made after the record, they would be another run.)"""
    stored = api.get("ConfigMap", LEDGER, NS)
    assert stored is not None
    entries = json.loads(stored["data"][ledgerstore.DATA_KEY])
    stamp = datetime.now(UTC) - timedelta(hours=hours)
    for entry in entries:
        entry["finished_at"] = stamp.isoformat(timespec="seconds")
    stored["data"][ledgerstore.DATA_KEY] = json.dumps(entries)
    status, _, body = raw(api, "PUT", f"/api/v1/namespaces/{NS}/configmaps/{LEDGER}", stored)
    assert status == 200, body
    (entry,) = read_shard(api.get("ConfigMap", LEDGER, NS)).entries.values()
    return entry


def runtime_ids(api: KubeAPI) -> set[str]:
    return {o["metadata"]["labels"]["runtime_id"] for o in job_objects(api, "rev")}


def revert_after_a_second_spec_ran(api: KubeAPI, repo: Path, run: Syncer, *, wait: bool) -> str:
    """H1 succeeds and is recorded; H2 replaces it and runs; H1's TTL passes; the commit
    back to H1 is written. Returns H2's runtime id."""
    write(repo, spec(1, wait=wait))
    run()
    finish(api, "rev")
    first = run()
    assert summary_of(first, "rev").state == "Succeeded"
    write(repo, spec(2, wait=wait))
    assert summary_of(run(), "rev").action == "replace"  # H1 had finished: nothing waits
    api.run_job_controller(NS)
    (h2,) = runtime_ids(api)
    backdate_the_record(api, hours=1)  # H1's TTL passed while H2 ran
    write(repo, spec(1, wait=wait))
    return h2


def test_a_revert_to_a_finished_spec_under_wait_lets_the_other_run_end_and_starts_nothing(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    h2 = revert_after_a_second_spec_ran(kubeapi, repo, run, wait=True)
    for _ in range(2):  # the revert's sync, and the next: the TTL passed long ago
        outcome = run()
        row = summary_of(outcome, "rev")
        assert row.action == "hold", row
        assert "succeeded at" in row.reason and "runs to its end" in row.reason
        assert runtime_ids(kubeapi) == {h2}
        (entry,) = read_shard(kubeapi.get("ConfigMap", LEDGER, NS)).entries.values()
        assert entry.spec_hash == row.spec_hash  # still H1's record

    finish(kubeapi, "rev")
    ended = summary_of(run(), "rev")
    assert (ended.action, ended.state) == ("stop", "Succeeded")
    assert not job_objects(kubeapi, "rev")
    after = summary_of(run(), "rev")
    assert (after.action, after.state) == ("unchanged", "Succeeded")
    assert not job_objects(kubeapi, "rev")


def test_a_revert_to_a_finished_spec_under_replace_stops_the_other_run_and_starts_nothing(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    h2 = revert_after_a_second_spec_ran(kubeapi, repo, run, wait=False)
    stopped = summary_of(run(), "rev")
    assert (stopped.action, stopped.state) == ("stop", "Succeeded")
    assert h2 in stopped.reason and "succeeded at" in stopped.reason
    assert not job_objects(kubeapi, "rev")
    after = summary_of(run(), "rev")
    assert (after.action, after.state) == ("unchanged", "Succeeded")
    assert not job_objects(kubeapi, "rev")
