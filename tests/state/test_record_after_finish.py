"""Once a run has finished and its log is no longer read, the notes of later commits
carry the ledger's summary of its record, and `status` shows the whole record (the
series too) from the note of the commit that asked for the run (the real node's
custom-loop job showed best values and no series in status)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.commands.sync import sync
from mxgitops.outputs import report
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.sync import NS, batch_job, files, git_config, mxjob, summary_of
from tests.kubeapi.harness import KubeAPI

LOOP = "".join(
    "MXGITOPS_PROGRESS "
    + json.dumps({"epoch": epoch, "epochs": 3, "metrics": {"train-loss": 1.0 / epoch}})
    + "\n"
    for epoch in (1, 2, 3)
)


def test_a_finished_runs_series_stays_in_the_notes_of_later_syncs(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files=files(mxjob("loop", servers=0)))
    config = git_config(remote, kubeapi, tmp_path)
    sync(config)
    kubeapi.run_job_controller(NS)
    worker = batch_job(kubeapi, "loop", "worker")
    kubeapi.container_log(job=worker, namespace=NS, text=LOOP)
    kubeapi.kubelet(job=worker, namespace=NS, phase="Succeeded")
    finished = summary_of(sync(config), "loop").record
    assert finished is not None and finished.log.series["train-loss"][3] == 1.0 / 3

    sync(config)  # the same commit again: its note keeps the whole record it had
    note = report.parse_note(remote.note(remote.rev()) or "")
    assert note is not None
    kept = next(j for j in note.jobs if j.name == "loop").record
    assert kept is not None and kept.log.series == finished.log.series

    for turn in range(2):  # later commits, later syncs: the run's log is not read again
        remote.commit({f"README-{turn}": "touch\n"}, f"another commit {turn}")
        later = summary_of(sync(config), "loop").record
        assert later is not None and later.log.latest == finished.log.latest  # the ledger's
        again = summary_of(sync(config), "loop").record  # the same commit synced again
        assert again is not None and again.log.latest == finished.log.latest

    shown = CliRunner().invoke(
        main, ["status", "--repo", remote.url, "--cache-dir", str(tmp_path / "s"), "-o", "json"]
    )
    job = next(j for j in json.loads(shown.output)["jobs"] if j["name"] == "loop")
    assert job["record"]["series"]["train-loss"] == [[1, 1.0], [2, 0.5], [3, 1.0 / 3]]
