"""The sync collects each run's training record (issue 45): worker 0's log, read a
bounded chunk at a time on the API double's pod logs, folded into the record the note
of the commit that asked for the run keeps; the ledger keeps its summary once the run
finished; `status` shows it. Hostile logs and the per-sync budget: test_record_sync_hostile.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.commands.sync import sync
from mxgitops.outputs import report
from mxgitops.record.stored import read_record
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.sync import (
    INSTANCE,
    NS,
    batch_job,
    files,
    git_config,
    mxjob,
    read_shard,
    summary_of,
)
from tests.kubeapi.harness import KubeAPI

LOGS = Path(__file__).parents[1] / "data" / "training-logs"
MODULE_FIT = (LOGS / "mxnet-1.9.1-module-fit.log").read_text().splitlines(keepends=True)


def log_reads(api: KubeAPI) -> list[dict[str, Any]]:
    return [e for e in api.request_log if e["path"].endswith("/log")]


def first_epochs(count: int) -> str:
    """MXNet's own log up to the end of epoch `count` (Module.fit's validation lines)."""
    end = max(i for i, line in enumerate(MODULE_FIT) if f"Epoch[{count - 1}] Validation" in line)
    return "".join(MODULE_FIT[: end + 1])


@pytest.mark.double_only(
    "writes pod logs with the double's timestamps (the real node: tests/node/test_record.py)"
)
def test_a_running_jobs_worker_0_log_gives_its_progress_in_status_and_the_note_and_the_ledger_keeps_its_summary(  # noqa: E501
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    remote = make_git_remote(
        "jobs", files=files(mxjob("fit", servers=0, args=["train.py", "--num-epochs", "3"]))
    )
    config = git_config(remote, kubeapi, tmp_path)
    asked = remote.rev()
    sync(config)
    kubeapi.run_job_controller(NS)
    worker = batch_job(kubeapi, "fit", "worker")
    kubeapi.kubelet(job=worker, namespace=NS, phase="Running")
    kubeapi.container_log(job=worker, namespace=NS, text=first_epochs(1))
    kubeapi.clear_log()

    running = sync(config)
    reads = log_reads(kubeapi)
    assert len(reads) == 1  # one bounded read, from the log's start
    assert reads[0]["query"]["limitBytes"] == str(256 * 1024)
    assert reads[0]["query"]["timestamps"] == "true" and "sinceTime" not in reads[0]["query"]
    record = summary_of(running, "fit").record
    assert record is not None
    shown = record.progress
    assert (shown.epochs_done, shown.epochs, shown.percent) == (1, 3, 33.3)
    assert record.log.latest["validation-accuracy"] == 0.335938
    assert record.read_until

    # Another commit: the record stays in the note of the commit that asked for the run.
    remote.commit({"README": "touch\n"}, "another commit")
    kubeapi.advance_clock(60)
    kubeapi.append_container_log(
        job=worker, namespace=NS, text=first_epochs(3)[len(first_epochs(1)) :]
    )
    kubeapi.clear_log()
    later = sync(config)
    (read,) = log_reads(kubeapi)
    assert read["query"]["sinceTime"] == record.read_until  # from where it left off
    record = summary_of(later, "fit").record
    assert record is not None and record.progress.epochs_done == 3
    assert record.progress.percent == 100.0
    kept = report.parse_note(remote.note(asked) or "")
    assert kept is not None
    in_note = summary_of_note(kept, "fit").record
    assert in_note is not None and in_note.log.series == record.log.series
    assert dict(in_note.log.series["validation-accuracy"]) == {
        1: 0.335938,
        2: 0.335938,
        3: 0.335938,
    }

    out = CliRunner().invoke(
        main, ["status", "--repo", remote.url, "--cache-dir", str(tmp_path / "c2")]
    )
    assert out.exit_code == 0, out.output
    row = next(line for line in out.output.splitlines() if line.startswith(f"{NS}/fit"))
    assert "epoch 3/3  100%  val-accuracy 0.3359" in row
    shown_json = CliRunner().invoke(
        main, ["status", "--repo", remote.url, "--cache-dir", str(tmp_path / "c3"), "-o", "json"]
    )
    job = next(j for j in json.loads(shown_json.output)["jobs"] if j["name"] == "fit")
    assert job["record"]["series"]["validation-accuracy"] == [
        [1, 0.335938],
        [2, 0.335938],
        [3, 0.335938],
    ]

    # Finished: the sync that first sees it reads once more, and the ledger keeps the summary.
    kubeapi.advance_clock(60)
    kubeapi.append_container_log(
        job=worker, namespace=NS, text="Epoch[2] Validation-accuracy=0.5\n"
    )
    kubeapi.kubelet(job=worker, namespace=NS, phase="Succeeded")
    kubeapi.clear_log()
    done = sync(config)
    assert len(log_reads(kubeapi)) == 1
    record = summary_of(done, "fit").record
    assert record is not None and record.log.latest["validation-accuracy"] == 0.5
    ledger = read_shard(kubeapi.get("ConfigMap", f"mxgitops-ledger-{INSTANCE}", NS))
    entry = ledger.entries[(NS, "fit")]
    summary = read_record(entry.record)
    assert summary.log.latest["validation-accuracy"] == 0.5
    assert summary.log.best["validation-accuracy"] == 0.5
    assert not summary.log.series  # the summary form: no series
    assert len(entry.record.encode()) <= 1024

    kubeapi.clear_log()
    sync(config)
    assert not log_reads(kubeapi)  # finished and read once more: never again


def summary_of_note(note: Any, name: str) -> Any:
    return next(j for j in note.jobs if j.name == name)
