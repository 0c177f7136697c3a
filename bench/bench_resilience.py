"""Benchmark what issue 13 asked figures for: a big ledger, a hung API, a SIGTERM.

    python -m bench.bench_resilience [FINISHED_JOBS]

(a) A ledger of FINISHED_JOBS (default 100,000) finished jobs, sharded over
    ConfigMaps, and one manifest: requests and wall time of a no-op sync
    (target: 4 requests, the same as with an empty ledger), then of the sync
    that records one more finished job (how many shards it rewrites).
(b) `mxgitops sync` against an API server that accepts and never answers (the
    double's `hang` fault): seconds until it exits 4, at the default
    --request-timeout (30 s) and at 5 s.
(c) `mxgitops sync` SIGTERMed while its batch-Job creates hang: seconds from
    the signal to the exit, and whether the Lease was released.

The API double runs in this process (a thread); the CLI runs as a subprocess.
Prints figures; not a test.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from mxgitops.commands.sync import sync
from mxgitops.kube import cluster
from mxgitops.planning.ledger import Finished, Ledger
from mxgitops.runtimes.registry import install_hash_shapes
from mxgitops.settings.config import SyncConfig
from mxgitops.state import ledgerstore
from tests.kubeapi.harness import KubeAPI

NS = "bench"
INSTANCE = "bench"


def manifest(name: str, *, workers: int = 1) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        container = {"name": "mxnet", "image": "mxnet/python:1.9.1", "args": ["train.py"]}
        return {"replicas": count, "template": {"spec": {"containers": [container]}}}

    replicas = {"Worker": replica(workers)}
    if workers > 1:
        replicas = {"Scheduler": replica(1), "Server": replica(1), **replicas}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name},
        "spec": {"jobMode": "MXTrain", "mxReplicaSpecs": replicas},
    }


def repo_of(root: Path, *docs: dict[str, Any]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        (root / f"{doc['metadata']['name']}.yaml").write_text(yaml.safe_dump(doc))
    return root


def config(api: KubeAPI, repo: Path, **overrides: Any) -> SyncConfig:
    values: dict[str, Any] = {
        "repo": str(repo),
        "kubeconfig": api.kubeconfig,
        "namespace": NS,
        "instance": INSTANCE,
        "cache_dir": repo.parent / "cache",
        "notes": False,
        **overrides,
    }
    return SyncConfig(**values)


def big_ledger(count: int, tmp: Path) -> None:
    with KubeAPI(tmp / "kubeconfig-a") as api:
        now = datetime.now(UTC).isoformat(timespec="seconds")
        entries = {
            (NS, f"job-{i:06d}"): Finished(
                NS, f"job-{i:06d}", f"{i:064x}", "Succeeded", "2026-01-01T00:00:00+00:00", now
            )
            for i in range(count)
        }
        shards = ledgerstore.to_config_maps(Ledger(entries), instance=INSTANCE, namespace=NS)
        for obj in shards:
            api.create(obj, NS)
        repo = repo_of(tmp / "repo-a", manifest("live"))
        connect = functools.partial(cluster.connect, sleep=lambda _: None)
        sync(config(api, repo), connect=connect)
        api.clear_log()
        started = time.perf_counter()
        sync(config(api, repo), connect=connect)
        elapsed = time.perf_counter() - started
        log = api.request_log
        print(
            f"(a) ledger of {count:,} finished jobs in {len(shards)} ConfigMaps: a no-op sync made "
            f"{len(log)} requests ({', '.join(e['verb'] + ' ' + e['resource'] for e in log)}) "
            f"in {elapsed:.2f} s"
        )
        api.run_job_controller(NS)
        (job,) = [o["metadata"]["name"] for o in api.objects("jobs", NS)]
        api.kubelet(job=job, namespace=NS, phase="Succeeded")
        api.clear_log()
        started = time.perf_counter()
        sync(config(api, repo), connect=connect)
        elapsed = time.perf_counter() - started
        log = api.request_log
        written = [e for e in log if e["resource"] == "configmaps" and e["verb"] != "list"]
        print(
            f"    one more finished job: {len(written)} ConfigMap write(s), "
            f"{len(log)} requests in {elapsed:.2f} s"
        )


def cli(api: KubeAPI, repo: Path, *extra: str) -> subprocess.Popen[str]:
    args = [
        *("sync", "--repo", str(repo), "--kubeconfig", str(api.kubeconfig)),
        *("--namespace", NS, "--instance", INSTANCE, "--no-notes", *extra),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MXGITOPS_")}
    env["MXGITOPS_CACHE_DIR"] = str(repo.parent / "cache")
    return subprocess.Popen(
        [sys.executable, "-c", "from mxgitops.cli import main; main()", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def hung_api(tmp: Path) -> None:
    for timeout in (None, 5.0):
        with KubeAPI(tmp / f"kubeconfig-b{timeout}") as api:
            repo = repo_of(tmp / f"repo-b{timeout}", manifest("a"))
            api.faults("*:hang=1")
            extra = () if timeout is None else ("--request-timeout", str(timeout))
            started = time.perf_counter()
            process = cli(api, repo, *extra)
            _, stderr = process.communicate(timeout=120)
            elapsed = time.perf_counter() - started
            print(
                f"(b) hung API, --request-timeout {timeout or 'default (30)'}: exit "
                f"{process.returncode} after {elapsed:.1f} s (process start included): "
                f"{stderr.strip().splitlines()[-1]}"
            )


def sigterm(tmp: Path) -> None:
    with KubeAPI(tmp / "kubeconfig-c") as api:
        repo = repo_of(tmp / "repo-c", *(manifest(f"j{i}", workers=4) for i in range(4)))
        api.faults("create/jobs:hang=1")
        process = cli(api, repo, "--parallelism", "8")
        if not api.server.faults.hanging.wait(timeout=60):
            raise SystemExit("no write reached the double")
        started = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
        elapsed = time.perf_counter() - started
        lease = api.get("Lease", f"mxgitops-{INSTANCE}", NS) or {}
        released = not (lease.get("spec") or {}).get("holderIdentity")
        print(
            f"(c) SIGTERM with 8 batch-Job creates in flight: exit {process.returncode} after "
            f"{elapsed:.2f} s, Lease released: {released}: {stderr.strip()}"
        )


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory(prefix="bench-resilience-") as scratch:
        tmp = Path(scratch)
        big_ledger(count, tmp)
        hung_api(tmp)
        sigterm(tmp)


if __name__ == "__main__":
    install_hash_shapes()  # this script is an entry point: see the registry
    main()
