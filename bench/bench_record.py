"""The training record's cost (issue 45): a no-op sync of running dist jobs with the
record off and on, side by side, against the real control plane.

    python -m bench.bench_record [--jobs N]        (default: 1000)

etcd and kube-apiserver of tests/controlplane, no controllers, and the fake kubelet
(tests/controlplane/kubelet.py) serving the pods' logs through the API server's
`pods/{name}/log`. N dist jobs (1 scheduler, 2 servers, 4 workers; `--num-epochs 10`)
in a Git repository (a bare remote, as the CronJob's), created by a first sync; then
each job's worker-0 pod, made here as the job controller would make it (no job
controller: thousands of other pods would only add noise), bound to the fake node
and Running, its log 5 epochs of MXNet's `Module.fit` lines (Speedometer, Train-,
Validation-, Time cost), each after its RFC 3339 time as `timestamps=true` serves it.

A warm-up sync reads every log once (the records in the notes from then on), then
no-op syncs, interleaved, 3 rounds of: the record off (`training_log_reads=0`), on at
the default budget, on at a budget of N. Requests are counted from the API server's
audit log (mxgitops' identity only). Prints, for each, the median wall time, the
requests by verb/resource, the load average, and the ratio to off. Not a test.

The fake kubelet honours `limitBytes` but not `sinceTime`: every read here returns
the whole log (as if nothing had been read before), the most a read of this log can
cost; on a real kubelet a read returns only what was printed since the last.

Measured here (2 cores, a CI run beside it, load 14 to 20; 1,000 jobs): setup, the
first sync 70.5 s and 9,026 requests, the pods 57.1 s; the warm-up 49.4 s, 1,000 log
reads. No-op, median of 3: off 4 requests (the LISTs) in 15.32 s; on at the default
budget 104 requests (100 `pods/log` GETs) in 22.36 s, 1.46x off; on at a budget of
1,000, 1,004 requests in 55.23 s, 3.61x off: about 40 ms a read, one after another.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from bench.bench_sync import audited, manifest
from mxgitops.commands.sync import SyncOutcome, sync
from mxgitops.runtimes.registry import install_hash_shapes
from mxgitops.settings.config import DEFAULT_TRAINING_LOG_READS, SyncConfig

NS = "bench"
EPOCHS_LOGGED, EPOCHS_DECLARED, BATCH_LINES = 5, 10, 10
ROUNDS = 3


def write_repo(tmp: Path, jobs: int) -> str:
    """A bare repository holding `jobs` dist jobs under jobs/; its file URL."""
    from tests.gitrepos.fixtures import run_git

    bare, work = tmp / "jobs.git", tmp / "work"
    run_git("init", "--quiet", "--bare", "--initial-branch=main", str(bare), cwd=tmp)
    run_git("clone", "--quiet", str(bare), str(work), cwd=tmp)
    (work / "jobs").mkdir()
    for index in range(jobs):
        doc = manifest(index)
        for replica in doc["spec"]["mxReplicaSpecs"].values():
            container = replica["template"]["spec"]["containers"][0]
            container["args"] += ["--num-epochs", str(EPOCHS_DECLARED)]
        (work / "jobs" / f"job-{index:04d}.yaml").write_text(yaml.safe_dump(doc))
    for args in (
        ("add", "--all"),
        ("-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-qm", "jobs"),
        ("push", "--quiet", "origin", "HEAD:main"),
    ):
        run_git(*args, cwd=work)
    return bare.as_uri()


def training_log(start: datetime) -> str:
    """`EPOCHS_LOGGED` epochs of Module.fit's lines, each after its kubelet timestamp."""
    lines, at = [], start
    for epoch in range(EPOCHS_LOGGED):
        for batch in range(BATCH_LINES):
            accuracy = 0.3 + 0.06 * epoch + 0.001 * batch
            lines.append(
                f"INFO Epoch[{epoch}] Batch [{batch * 50}-{batch * 50 + 50}]\t"
                f"Speed: {6400 + batch:.2f} samples/sec\taccuracy={accuracy:.6f}\t"
                f"cross-entropy={1.1 - accuracy / 2:.6f}"
            )
        lines += [
            f"INFO Epoch[{epoch}] Train-accuracy={0.3 + 0.06 * epoch:.6f}",
            f"INFO Epoch[{epoch}] Time cost={12.5 + epoch / 10:.3f}",
            f"INFO Epoch[{epoch}] Validation-accuracy={0.32 + 0.06 * epoch:.6f}",
        ]
    stamped = []
    for line in lines:
        at += timedelta(milliseconds=250)
        stamped.append(f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {line}\n")
    return "".join(stamped)


def start_worker_pods(rest: Any, node: Any) -> int:
    """Each worker-0 batch Job's pod, as the job controller would make it, bound to the
    fake node and Running; how many."""
    from tests.controlplane.kubelet import NODE
    from tests.kubeapi import podstatus

    jobs = rest.get(f"/apis/batch/v1/namespaces/{NS}/jobs")["items"]
    workers = [
        j
        for j in jobs
        if "-worker-" in j["metadata"]["name"] and j["metadata"]["name"].endswith("-0")
    ]
    for job in workers:
        meta, template = job["metadata"], job["spec"]["template"]
        labels = {
            **(template["metadata"].get("labels") or {}),
            "batch.kubernetes.io/job-name": meta["name"],
            "job-name": meta["name"],
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{meta['name']}-p0",
                "namespace": NS,
                "labels": labels,
                "annotations": template["metadata"].get("annotations") or {},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {**template["spec"], "nodeName": NODE},
        }
        created = rest.create(f"/api/v1/namespaces/{NS}/pods", pod)
        node.step(created, podstatus.Step(phase="Running"))
    return len(workers)


def measure(plane: Any, config: SyncConfig) -> tuple[float, Counter[str], float]:
    """One sync: wall seconds, its requests by verb/resource, the 1-minute load."""
    elapsed, kinds, load, _ = measured(plane, config)
    return elapsed, kinds, load


def measured(plane: Any, config: SyncConfig) -> tuple[float, Counter[str], float, SyncOutcome]:
    """`measure`, and the sync's outcome."""
    since = plane.audit_log.stat().st_size
    start = time.perf_counter()
    outcome = sync(config)
    elapsed = time.perf_counter() - start
    assert outcome.ok, [e for j in outcome.summary.jobs for e in j.errors][:3]
    kinds = Counter(
        f"{e['verb']} {(e.get('objectRef') or {}).get('resource', '')}"
        + (
            f"/{e['objectRef']['subresource']}"
            if (e.get("objectRef") or {}).get("subresource")
            else ""
        )
        for e in audited(plane.audit_log, since)
    )
    return elapsed, kinds, os.getloadavg()[0], outcome


def main(jobs: int) -> None:
    from tests.controlplane.kubelet import FakeKubelet
    from tests.controlplane.launcher import ControlPlane
    from tests.controlplane.rest import Rest

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        url = write_repo(tmp, jobs)
        print(f"{jobs} running dist jobs (1 scheduler, 2 servers, 4 workers), real kube-apiserver")
        with ControlPlane(tmp / "plane", controllers=False) as plane:
            assert plane.pki and plane.admin and plane.audit_log
            admin = Rest(plane.url, plane.pki.ca, plane.admin.cert, plane.admin.key)
            node = FakeKubelet(admin, plane.pki.serving("kubelet")).start()
            try:
                admin.create("/api/v1/namespaces", {"metadata": {"name": NS}})
                # Its pods' ServiceAccount, which the (not running) controller would make.
                admin.create(
                    f"/api/v1/namespaces/{NS}/serviceaccounts", {"metadata": {"name": "default"}}
                )
                base = SyncConfig(
                    repo=url,
                    path="jobs",
                    kubeconfig=plane.kubeconfig(tmp / "kubeconfig"),
                    namespace=NS,
                    instance="bench",
                    parallelism=16,
                    cache_dir=tmp / "cache",
                )
                first, kinds, load = measure(plane, base)
                print(f"setup: first sync {first:.1f} s, {sum(kinds.values())} requests")
                started = time.perf_counter()
                running = start_worker_pods(admin, node)
                text = training_log(datetime.now(UTC) - timedelta(minutes=5))
                for batch_job in admin.get(f"/apis/batch/v1/namespaces/{NS}/jobs")["items"]:
                    node.logs.texts[(NS, batch_job["metadata"]["name"])] = text
                print(
                    f"setup: {running} worker-0 pods Running in "
                    f"{time.perf_counter() - started:.1f} s; each log {len(text.encode())} "
                    f"bytes, {text.count(chr(10))} lines"
                )
                default = DEFAULT_TRAINING_LOG_READS
                budgets = {
                    "off (0 reads)": 0,
                    f"on, default budget ({default})": default,
                    f"on, budget {jobs}": jobs,
                }
                warm, kinds, load, outcome = measured(plane, _with(base, jobs))
                recorded = [j.record for j in outcome.summary.jobs if j.record is not None]
                done = Counter(
                    f"{r.progress.epochs_done}/{r.progress.epochs} epochs" for r in recorded
                )
                print(f"warm-up: {len(recorded)} records ({_shown(done)})")
                print(
                    f"warm-up (budget {jobs}, every record written first): {warm:.1f} s, "
                    f"{_shown(kinds)}, load {load:.1f}"
                )
                results: dict[str, list[tuple[float, Counter[str], float]]] = {}
                for _ in range(ROUNDS):
                    for title, budget in budgets.items():
                        results.setdefault(title, []).append(measure(plane, _with(base, budget)))
                print(f"no-op syncs, median of {ROUNDS} interleaved (off, on, on; x{ROUNDS}):")
                off_time = statistics.median(r[0] for r in results["off (0 reads)"])
                off_requests = statistics.median(
                    sum(r[1].values()) for r in results["off (0 reads)"]
                )
                for title, rows in results.items():
                    wall = statistics.median(r[0] for r in rows)
                    requests = statistics.median(sum(r[1].values()) for r in rows)
                    loads = ", ".join(f"{r[2]:.1f}" for r in rows)
                    print(
                        f"  {title:>26}: {wall:6.2f} s (min {min(r[0] for r in rows):.2f}, "
                        f"max {max(r[0] for r in rows):.2f}), {requests:>5.0f} requests "
                        f"({_shown(rows[-1][1])}); x{wall / off_time:.2f} the time, "
                        f"x{requests / off_requests:.1f} the requests of off; load {loads}"
                    )
            finally:
                node.stop()


def _with(config: SyncConfig, budget: int) -> SyncConfig:
    from dataclasses import replace

    return replace(config, training_log_reads=budget)


def _shown(kinds: Counter[str]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items()))


if __name__ == "__main__":
    install_hash_shapes()  # this script is an entry point: see the registry
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    main(parser.parse_args().jobs)
