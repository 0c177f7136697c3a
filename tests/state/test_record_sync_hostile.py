"""Hostile logs and the cost of the training record (issue 45), on the API double's pod
logs: whatever worker 0 prints is bounded and inert and never fails a sync, a line
another pod of the job prints is never seen, and a sync reads at most its budget of
running jobs, the least recently read first.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mxgitops.commands.sync import sync
from mxgitops.record.lines import NAME
from mxgitops.record.reading import MAX_METRICS
from mxgitops.record.stored import MAX_NOTE_BYTES, note_json
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.sync import NS, batch_job, files, git_config, mxjob, summary_of
from tests.kubeapi.harness import KubeAPI

FORGED = "Epoch[98] Validation-accuracy=1.0\nEpoch[98] Time cost=0.001\n"


def log_reads(api: KubeAPI) -> list[dict[str, Any]]:
    return [e for e in api.request_log if e["path"].endswith("/log")]


def hostile_log() -> list[str]:
    """Three seconds of log: the second a line of megabytes."""
    names = "\t".join(f"m{i}={i}" for i in range(3000))
    return [
        "Epoch[0] Batch [0-4]\tSpeed: 1e999 samples/sec\taccuracy=nan\n"
        f"Epoch[0] Batch [4-8]\tSpeed: 10.0 samples/sec\t{names}\n",  # too long: skipped
        "x" * (3 << 20) + " Epoch[0] Validation-accuracy=0.99\n",  # megabytes long
        "".join(
            [
                "\x1b[31mEpoch[0] Validation-accuracy=0.25\x1b[0m\n",
                *(f"Epoch[0] Train-metric{i}={i}.5\n" for i in range(2000)),
                "Epoch[0] Validation-<b>[x](http://e.example)</b>=1\n",  # markdown: no plain name
                "Epoch[0] Validation-cross-entropy=inf\n",
                "Epoch[0] Validation-top_k_accuracy=12345678901234567890123456789.5\n",
                "Epoch[0] Time cost=\x00\x07\x08 3\n",
                "Epoch[0] Train-accuracy=0.5\n",
            ]
        ),
    ]


@pytest.mark.double_only("writes pod logs, which only the double takes from a test")
def test_a_hostile_worker_0_log_is_bounded_and_inert_and_another_pods_line_is_never_seen(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files=files(mxjob("h", servers=1, workers=2)))
    config = git_config(remote, kubeapi, tmp_path)
    sync(config)
    kubeapi.run_job_controller(NS)
    for role, index in (("scheduler", 0), ("server", 0), ("worker", 1)):
        job = batch_job(kubeapi, "h", role, index)
        kubeapi.kubelet(job=job, namespace=NS, phase="Running")
        kubeapi.container_log(job=job, namespace=NS, text=FORGED)
    worker = batch_job(kubeapi, "h", "worker", 0)
    kubeapi.kubelet(job=worker, namespace=NS, phase="Running")
    for second in hostile_log():
        kubeapi.append_container_log(job=worker, namespace=NS, text=second)
        kubeapi.advance_clock(1)

    # 256 KiB a read: the line of megabytes is passed over by the second sync (its
    # first read of it stopped within it), the third reads what follows it.
    for _ in range(3):
        kubeapi.clear_log()
        outcome = sync(config)
        assert outcome.ok
        (read,) = log_reads(kubeapi)  # worker 0's pod alone
        assert f"/pods/{worker}-" in read["path"]
        assert read["query"]["limitBytes"] == str(256 * 1024)
    record = summary_of(outcome, "h").record
    assert record is not None
    log = record.log
    assert log.epoch == 1  # the forged Epoch[98] of the other pods is never seen
    assert len(log.latest) == MAX_METRICS  # the first names seen: 2,000 were printed
    assert all(NAME.fullmatch(name) for name in log.latest)
    assert log.latest.get("validation-accuracy") == 0.25  # the ANSI line, cleaned
    assert "validation-cross-entropy" not in log.latest  # inf dropped
    assert log.throughput != float("inf")
    assert len(note_json(record).encode()) <= MAX_NOTE_BYTES


@pytest.mark.double_only("moves the double's clock and writes pod logs")
def test_with_a_budget_of_n_a_sync_reads_n_running_jobs_and_the_next_the_one_left(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    names = ("a", "b", "c")
    remote = make_git_remote("jobs", files=files(*(mxjob(n, servers=0) for n in names)))
    config = git_config(remote, kubeapi, tmp_path, training_log_reads=2)
    sync(config)
    kubeapi.run_job_controller(NS)
    kubeapi.clear_log()
    sync(config)  # created, not running: no log is read
    assert not log_reads(kubeapi)
    pods: dict[str, str] = {}
    for name in names:
        job = batch_job(kubeapi, name, "worker")
        kubeapi.kubelet(job=job, namespace=NS, phase="Running")
        kubeapi.container_log(job=job, namespace=NS, text="Epoch[0] Train-accuracy=0.5\n")
        pods[name] = job
    kubeapi.clear_log()

    first = sync(config)
    read_first = {e["path"] for e in log_reads(kubeapi)}
    assert len(read_first) == 2
    left = [n for n in names if not any(f"/pods/{pods[n]}-" in p for p in read_first)]
    assert len(left) == 1 and summary_of(first, left[0]).record is None

    kubeapi.advance_clock(30)
    kubeapi.clear_log()
    second = sync(config)
    read_second = [e["path"] for e in log_reads(kubeapi)]
    assert len(read_second) == 2
    assert any(f"/pods/{pods[left[0]]}-" in p for p in read_second)  # never read: first
    assert all(summary_of(second, n).record is not None for n in names)
