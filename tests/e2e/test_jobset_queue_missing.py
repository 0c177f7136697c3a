"""A queued job whose LocalQueue does not exist waits for ever: the sync says so, with
the namespace, and that `schedulingPolicy.queue` names a Kueue LocalQueue (where the
operator, with Volcano, named a Volcano queue). Kueue's own words are "LocalQueue X
doesn't exist" (v0.17, `workload_controller.go`). Pure: live objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mxgitops.objects import LiveObjects
from mxgitops.runtimes import registry as runtimes
from mxgitops.runtimes.jobset.kinds import JOBSET, WORKLOAD
from mxgitops.runtimes.jobset.render import render_jobset
from mxgitops.runtimes.shared.state import State
from tests.controlplane.harness import wait_for
from tests.ecosystem.fixtures import Ecosystem
from tests.helpers.jobset import CTX, job_of, only_jobset, queued
from tests.helpers.sync import NS, Syncer, mxjob, repo, summary_of, write

__all__ = ["repo"]  # the fixture, used here too


def workload_saying(uid: str, name: str, reason: str, message: str) -> dict[str, Any]:
    condition = {"type": "QuotaReserved", "status": "False", "reason": reason, "message": message}
    return {
        "metadata": {
            "name": "w",
            "namespace": "ml",
            "ownerReferences": [{"kind": "JobSet", "name": name, "uid": uid}],
        },
        "status": {"conditions": [condition]},
    }


def test_a_missing_local_queue_is_said_with_its_namespace_and_what_the_queue_names() -> None:
    (jobset,) = render_jobset(job_of(queued(queue="gpu-team")), CTX)
    stored = json.loads(json.dumps(jobset))
    stored["metadata"].update(uid="u1")
    workload = workload_saying(
        "u1", stored["metadata"]["name"], "Inadmissible", "LocalQueue gpu-team doesn't exist"
    )
    group = runtimes.group_live(LiveObjects(kinds={JOBSET: (stored,), WORKLOAD: (workload,)}))
    state, replicas = group[("ml", "a")].status()
    assert state is State.QUEUED
    assert replicas[0].reason == (
        "the LocalQueue gpu-team does not exist in namespace ml: the job waits until it "
        "does (schedulingPolicy.queue names a Kueue LocalQueue, not a Volcano queue)"
    )


def test_the_real_kueue_says_so_and_the_sync_reads_it(ecosystem: Ecosystem, repo: Path) -> None:
    """Kueue v0.17 makes the Workload and marks it inadmissible; nothing runs."""
    run = Syncer(ecosystem, repo)  # type: ignore[arg-type]  # the harness duck-types
    write(repo, mxjob("lost", runPolicy={"schedulingPolicy": {"queue": "nowhere"}}))
    assert run().ok
    name = only_jobset(ecosystem, "lost")["metadata"]["name"]

    def judged() -> bool:
        return any(
            w["metadata"]["ownerReferences"][0]["name"] == name
            and any(c["type"] == "QuotaReserved" for c in w.get("status", {}).get("conditions", []))
            for w in ecosystem.workloads(NS)
        )

    wait_for("Kueue to judge the job", lambda: judged() or None)
    job = summary_of(run(), "lost")
    assert job.state == "Queued"
    assert job.state_reason.startswith(
        f"the LocalQueue nowhere does not exist in namespace {NS}"
    ), job.state_reason
    assert ecosystem.pods(name, NS) == []
