"""A job's queue (issue 46: "queue and cluster"): the Kueue LocalQueue a job names
(its manifest's `schedulingPolicy.queue`, the `kueue.x-k8s.io/queue-name` label of its
live JobSet) is in the sync's summary, `status -o json`, and the dashboard's jobs and
job pages."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.objects import LiveObjects
from mxgitops.outputs import report
from mxgitops.outputs.summary import JobSummary, Summary
from mxgitops.planning.changes import PlanOptions
from mxgitops.planning.ledger import Ledger
from mxgitops.planning.plan import plan
from mxgitops.runtimes.jobset.kinds import JOBSET
from mxgitops.runtimes.jobset.render import render_jobset
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.dashboard import page, serving
from tests.helpers.history import NS, add_note, manifest
from tests.helpers.jobset import CTX, job_of, queued


def test_the_summary_names_the_queue_of_a_queued_job_and_of_a_live_one_git_no_longer_names() -> (
    None
):
    wanted = job_of(queued("a", queue="gpu-team"))
    plain = job_of(queued("b", queue=""), runtime="batch")
    (jobset,) = render_jobset(job_of(queued("gone", queue="cpu-team")), CTX)
    live = LiveObjects(kinds={JOBSET: (json.loads(json.dumps(jobset)),)})
    made = plan([wanted, plain], live, Ledger(), PlanOptions(instance="prod", prune=True))
    summary = report.summarize(made, None)
    queues = {job.name: job.queue for job in summary.jobs}
    assert queues == {"a": "gpu-team", "b": "", "gone": "cpu-team"}
    again = report.parse_note(report.render_note(summary))
    assert again is not None and {job.name: job.queue for job in again.jobs} == queues


def test_status_json_and_the_dashboard_show_the_queue(
    make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    remote = make_git_remote("jobs")
    synced = remote.commit({"jobs/mnist.yaml": manifest("mnist", "0.1")}, "mnist")
    job = JobSummary(
        NS, "mnist", "create", "new job", state="Queued", commit=synced, queue="gpu-<team>"
    )
    add_note(remote, synced, report.render_note(Summary(commit=synced, jobs=(job,))))

    args = ["status", "--repo", remote.url, "--cache-dir", str(tmp_path / "c1"), "-o", "json"]
    shown = CliRunner().invoke(main, args)
    assert shown.exit_code == 0, shown.output
    (told,) = json.loads(shown.output)["jobs"]
    assert told["queue"] == "gpu-<team>"

    with serving(remote, tmp_path / "c2") as (server, _):
        jobs_page = page(server, "/")
        assert "<th>Queue</th>" in jobs_page
        assert "<td>gpu-&lt;team&gt;</td>" in jobs_page
        job_page = page(server, f"/jobs/{NS}/mnist")
        assert "<dt>Queue</dt><dd>gpu-&lt;team&gt;</dd>" in job_page
