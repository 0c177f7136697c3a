"""The first and a no-op sync of queued dist jobs against a Kueue MultiKueue manager with
two workers, beside the single-cluster JobSet figures of bench_jobset.py.

    python -m bench.bench_multikueue [JOBS]        (default: 1000)

The clusters of tests/ecosystem/multikueue.py (three real control planes, each with the
real JobSet and Kueue; the manager dispatching to the workers as the manual's example
sets it up). mxgitops is given the manager's kubeconfig only; JOBS dist jobs (1
scheduler, 2 servers, 4 workers, each worker asking for 1 CPU) name the LocalQueue, so
Kueue admits and dispatches as many as the quota holds (16 CPUs on the manager, 8 on
each worker) while the syncs run, and queues the rest. Requests are counted from the
manager's audit log (mxgitops' identity); the workers' logs must show none of it.

Prints figures; not a test.

Measured here (2 cores, other test runs beside; 1,000 jobs, Events on): the clusters
ready in 51.1 s; the first sync 2,012 requests in 42.2 s (1,000 JobSets, 1,000 Events,
the ledger), the no-op 6 requests in 4.8 s (JobSets, Workloads, jobs, services, pods,
the ledger), none on a worker; 4 jobs dispatched (2 on each worker: 4 CPUs a job),
996 queued on the manager. Beside bench_jobset.py's one cluster (no controllers):
the same requests; the first sync slower (33.2 s there), the manager's JobSet and
Kueue webhooks admitting each create. Again once a sync that finds a job on a worker
lists the MultiKueueClusters (whether the manager reaches each worker): clusters ready
in 60.5 s, the first sync 2,012 requests in 56.9 s, the no-op 7 in 5.9 s (the LIST of
multikueueclusters the one more), none on a worker.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

from bench.bench_sync import audited, manifest
from mxgitops.commands.sync import sync
from mxgitops.runtimes.registry import install_hash_shapes
from mxgitops.settings.config import SyncConfig


def main(jobs: int = 1000) -> None:
    from tests.ecosystem.multikueue import LOCAL_QUEUE, MultiKueue

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        began = time.perf_counter()
        with MultiKueue(tmp / "clusters", namespaces=("bench",)) as clusters:
            print(f"three clusters ready in {time.perf_counter() - began:.1f} s")
            repo = tmp / "repo"
            repo.mkdir()
            for index in range(jobs):
                doc = manifest(index)
                doc["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": LOCAL_QUEUE}}
                worker = doc["spec"]["mxReplicaSpecs"]["Worker"]["template"]["spec"]
                worker["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
                (repo / f"job-{index:04d}.yaml").write_text(yaml.safe_dump(doc))
            manager = clusters.manager
            audit_log = manager.plane.audit_log
            assert audit_log is not None
            config = SyncConfig(
                repo=str(repo),
                kubeconfig=manager.real.kubeconfig,
                namespace="bench",
                instance="bench",
                parallelism=16,
                cache_dir=tmp / "cache",
            )
            print(f"{jobs} queued dist jobs (1 scheduler, 2 servers, 4 workers), the manager's")
            for title in ("first sync (parallelism 16)", "no-op sync"):
                for worker in clusters.workers:
                    worker.real.clear_log()
                since = audit_log.stat().st_size
                start = time.perf_counter()
                outcome = sync(config)
                elapsed = time.perf_counter() - start
                assert outcome.ok, [e for j in outcome.summary.jobs for e in j.errors][:3]
                log = audited(audit_log, since)
                kinds = Counter(
                    f"{e['verb']} {(e.get('objectRef') or {}).get('resource', '')}" for e in log
                )
                shown = ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items()))
                print(f"  {title}: {len(log)} requests, {elapsed:.2f} s  ({shown})")
                assert all(w.real.request_log == [] for w in clusters.workers)
            placed = Counter(j.placement or "(queued)" for j in outcome.summary.jobs)
            print(f"  where the no-op found them: {dict(sorted(placed.items()))}")


if __name__ == "__main__":
    install_hash_shapes()  # this script is an entry point: see the registry
    main(int(sys.argv[1]) if sys.argv[1:] else 1000)
