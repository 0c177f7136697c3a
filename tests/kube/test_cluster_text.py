"""Text from the cluster is bounded and kept on one line before it reaches any output
(issue 43): a 200 KB Event message about a pod taken away, a 200 KB termination
message, a 20 KB MultiKueue `clusterName` with newlines and bidi overrides reach the
plan's rows, the note, `status`, the ledger and the Events as at most
`clustertext.MAX_SAID` characters each, on one line, with no bidi character left."""

from __future__ import annotations

import io
import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from mxgitops.kube.clustertext import MAX_SAID, said
from mxgitops.kube.listing import page_reader
from mxgitops.objects import Kind, LiveObjects
from mxgitops.outputs import report
from mxgitops.planning.changes import PlanOptions
from mxgitops.planning.ledger import Ledger
from mxgitops.planning.plan import plan
from mxgitops.runtimes import registry as runtimes
from mxgitops.runtimes.jobset.kinds import JOBSET, WORKLOAD
from mxgitops.runtimes.jobset.render import render_jobset
from tests.helpers.jobset import CTX, job_of, queued
from tests.helpers.sync import NS, Syncer, batch_job, mxjob, summary_of, write
from tests.kubeapi.clients import raw
from tests.kubeapi.harness import KubeAPI

BIDI = "\u202e\u2066\u200b"  # right-to-left override, isolate, zero-width space
HOSTILE = ("evil\n## Approved\r\n" + BIDI + "x" * 997 + "\t") * 200  # 200 KB


def single_bounded_lines(text: str, most: int) -> None:
    """Each line of `text` at most `most` characters, no bidi or zero-width character
    anywhere, and no run of the hostile text's lines (its newlines became spaces)."""
    assert not any(unicodedata.category(ch) == "Cf" for ch in text), text[:200]
    assert "\r" not in text and "\u2028" not in text
    assert "\n## Approved" not in text
    longest = max(len(line) for line in text.splitlines())
    assert longest <= most, longest


def test_said_keeps_one_bounded_line_and_shows_what_would_hide() -> None:
    assert said("Preempted by pod u on node n1") == "Preempted by pod u on node n1"
    shown = said("a\nb\u202ec")
    assert shown == "a b\\u202ec"
    cut = said("y" * 5000)
    assert len(cut) == MAX_SAID and cut.endswith("…")
    assert len(said(BIDI * 1000)) == MAX_SAID


@pytest.mark.double_only(
    "the batch Job's Failed condition is written by hand, which the real API server refuses "
    "without the Job controller's FailureTarget before it; the bound is at the read edge"
)
def test_a_huge_event_and_termination_message_reach_no_output_whole(
    kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """On the API double: a dist job's worker pod preempted and gone, the scheduler's
    core Event about it saying so in 200 KB; a local job failed with a 200 KB
    termination message. The row, the note, `status`, the ledger and the Events."""
    run = Syncer(kubeapi, tmp_path / "repo")
    write(run.repo, mxjob("train", restart="Never"), mxjob("oom", servers=0, restart="Never"))
    run(events=True)
    kubeapi.run_job_controller(NS)
    kubeapi.kubelet(
        job=batch_job(kubeapi, "oom", "worker"),
        namespace=NS,
        phase="Failed",
        exit_code=1,
        reason="Error",
        message=HOSTILE,
    )
    kubeapi.run_job_controller(NS)

    worker = batch_job(kubeapi, "train", "worker", 0)
    [pod] = [
        p["metadata"]["name"]
        for p in kubeapi.objects("pods", NS)
        if (p["metadata"].get("labels") or {}).get("job-name") == worker
    ]
    status, _, body = raw(kubeapi, "DELETE", f"/api/v1/namespaces/{NS}/pods/{pod}")
    assert status == 200, body
    failed = {
        "type": "Failed",
        "status": "True",
        "reason": "PodFailurePolicy",
        "message": f"Pod {NS}/{pod} has condition DisruptionTarget matching FailJob rule at "
        "index 0",
    }
    status, _, body = raw(
        kubeapi,
        "PATCH",
        f"/apis/batch/v1/namespaces/{NS}/jobs/{worker}/status",
        {"status": {"conditions": [failed], "failed": 1, "active": 0}},
        "application/merge-patch+json",
    )
    assert status == 200, body
    kubeapi.create(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{pod}.1", "namespace": NS},
            "involvedObject": {"kind": "Pod", "name": pod, "namespace": NS},
            "reason": "Preempted",
            "message": "Preempted by pod u on node n1 " + HOSTILE,
            "source": {"host": "n1"},
        },
        NS,
    )

    outcome = run(events=True)

    train, oom = summary_of(outcome, "train"), summary_of(outcome, "oom")
    assert train.action == "replace" and "preempted on node n1" in train.reason
    assert "evil ## Approved" in train.reason  # said, on one line
    assert oom.state == "Failed" and "evil ## Approved" in oom.failure["message"]
    for job in (train, oom):
        single_bounded_lines(job.reason, 2 * MAX_SAID)
        single_bounded_lines(json.dumps(job.failure, ensure_ascii=False), 2 * MAX_SAID)
    for shown in (
        report.render_note(outcome.summary),
        report.render_plan(outcome.summary, verbose=True),
        report.render_markdown(outcome.summary),
    ):
        single_bounded_lines(shown, 8 * MAX_SAID)
    # The ledger lives in the state namespace, here the one given (`state_namespace`).
    [ledger] = [c for c in kubeapi.objects("configmaps", NS) if "ledger" in c["metadata"]["name"]]
    kept = json.dumps(ledger["data"], ensure_ascii=False)
    assert "evil ## Approved" in kept and len(kept) < 8 * MAX_SAID
    single_bounded_lines(kept.replace("\\n", "\n"), 4 * MAX_SAID)
    for event in kubeapi.objects("events.events.k8s.io", NS):
        single_bounded_lines(event["note"], MAX_SAID)


def listed(kind: Kind, *items: dict[str, Any]) -> list[dict[str, Any]]:
    """`items` as a LIST of `kind` brings them: through the one page reader."""
    body = json.dumps({"kind": f"{kind}List", "metadata": {}, "items": list(items)}).encode()
    read = page_reader(kind, 100, kind.unread, False, kind.api_version)
    found, _ = read(io.BytesIO(body))  # type: ignore[arg-type]  # what the transport reads
    return found


def test_a_hostile_cluster_name_and_jobset_status_are_bounded_as_they_are_read() -> None:
    """A MultiKueue Workload naming a 20 KB cluster (newlines, bidi) and its JobSet
    failed with a 200 KB condition message: the row, the note and the ledger entry."""
    (jobset,) = render_jobset(job_of(queued()), CTX)
    jobset["metadata"].update(uid="u1", creationTimestamp="2026-01-01T00:00:00Z")
    jobset["spec"]["suspend"] = False
    failed = {"type": "Failed", "status": "True", "reason": "FailedJobs", "message": HOSTILE}
    jobset["status"] = {
        "conditions": [failed],
        "replicatedJobsStatus": [{"name": "worker", "failed": 1}],
    }
    name = ("worker-a\n" + BIDI + "b" * 1000) * 20
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "w",
            "namespace": "ml",
            "ownerReferences": [{"kind": "JobSet", "name": "x", "uid": "u1"}],
        },
        "status": {
            "clusterName": name,
            "admissionChecks": [{"name": "multikueue", "state": "Ready", "message": HOSTILE}],
        },
    }
    live = LiveObjects(
        kinds={JOBSET: tuple(listed(JOBSET, jobset)), WORKLOAD: tuple(listed(WORKLOAD, workload))}
    )
    assert runtimes.group_live(live)[("ml", "a")].placement().startswith("worker-a ")

    made = plan([job_of(queued())], live, Ledger(), PlanOptions(instance="prod"))
    summary = report.summarize(made, None, commit="c" * 40, instance="prod")
    [row] = summary.jobs
    assert row.state == "Failed" and row.placement.startswith("worker-a ")
    single_bounded_lines(row.placement, MAX_SAID)
    for shown in (
        report.render_note(summary),
        report.render_plan(summary, verbose=True),
        report.render_markdown(summary),
    ):
        single_bounded_lines(shown, 8 * MAX_SAID)
    [recorded] = [c.entry for c in made.ledger_changes]
    kept = json.dumps(recorded.__dict__, ensure_ascii=False, default=str)
    assert "FailedJobs" in kept
    single_bounded_lines(kept, 8 * MAX_SAID)
