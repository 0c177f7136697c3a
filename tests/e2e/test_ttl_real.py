"""ttlSecondsAfterFinished shorter than the sync interval, on the real control plane: its
job controller and TTL-after-finished controller act on their own, between syncs.

Two jobs with a TTL of one second finish between two syncs (one Succeeded at its
scheduler, one `Never` job Failed at a worker), and the real TTL controller is given
the time to collect what carries a TTL: a canary batch Job with the same TTL, finished
after them, is waited for until that controller deleted it. The next sync must read
both jobs finished (nothing of theirs was taken before a sync saw them finish), record
them and stop what still runs; once the TTL has passed since that sync (a second canary,
finished after it, gone), the next removes all their objects; and no later sync runs
them again or reads them Running. The real server only: the API double has no TTL
controller (tests/controlplane/DIFFERENCES.md, row 14).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers.sync import (
    INSTANCE,
    NS,
    Syncer,
    batch_job,
    canary,
    job_objects,
    mxjob,
    read_shard,
    repo,
    states,
    summary_of,
    write,
)

__all__ = ["repo"]  # the fixture, used here too

TTL = {"runPolicy": {"ttlSecondsAfterFinished": 1}}


def test_a_ttl_shorter_than_the_sync_interval_never_reruns_nor_reads_running(
    control_plane: Any, repo: Path
) -> None:
    real = control_plane
    real.wipe()
    write(repo, mxjob("done", **TTL), mxjob("broken", restart="Never", **TTL))
    run = Syncer(real, repo)
    assert {j.action for j in run().summary.jobs} == {"create"}
    real.run_job_controller(NS)
    real.kubelet(job=batch_job(real, "done", "scheduler"), namespace=NS, phase="Succeeded")
    worker = batch_job(real, "broken", "worker", 1)
    real.kubelet(job=worker, namespace=NS, phase="Failed", exit_code=3)
    canary(real, "canary-finished")

    seen = run()
    assert states(seen, "done")[0] == "Succeeded"
    assert states(seen, "broken")[0] == "Failed"
    assert summary_of(seen, "broken").failure is not None
    book = read_shard(real.get("ConfigMap", f"mxgitops-ledger-{INSTANCE}", NS))
    assert {(e.name, e.state) for e in book.entries.values()} == {
        ("done", "Succeeded"),
        ("broken", "Failed"),
    }
    assert job_objects(real, "done") and job_objects(real, "broken")

    canary(real, "canary-recorded")
    cleaned = run()
    for name in ("done", "broken"):
        assert summary_of(cleaned, name).action == "clean", summary_of(cleaned, name).reason
    real.settle(NS)
    for name in ("done", "broken"):
        assert not job_objects(real, name) and not job_objects(real, name, "services")

    after = run()
    assert [(j.name, j.action, j.state) for j in after.summary.jobs] == [
        ("broken", "unchanged", "Failed"),
        ("done", "unchanged", "Succeeded"),
    ]
    assert not job_objects(real, "done") and not job_objects(real, "broken")
