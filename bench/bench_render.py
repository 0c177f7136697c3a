#!/usr/bin/env python3
"""Time and memory of one very large dist job: 1 scheduler, 16 servers, 5,000 workers.

Two figures, each in a fresh process so that peak memory is the job's own:

- rendering: `render_job` of the job, in seconds and peak RSS;
- the whole dry run a pull request triggers: the installed `mxgitops sync
  --dry-run -o json` of a directory holding that one manifest, no cluster
  (wall seconds and the child's peak RSS, from `wait4`).

    .venv/bin/python bench/bench_render.py [--workers 5000] [--servers 16] [--budget 10]

Exits 1 when either takes longer than the budget (seconds), more than 300 MiB,
or the dry run does not plan the job's creation.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from bench_validate import command  # this script's folder is on sys.path

MAX_RSS_MIB = 300

RENDER = """
import json, resource, sys, time
import yaml
from mxgitops.runtimes.registry import install_hash_shapes
install_hash_shapes()
from mxgitops.manifests.spec import from_manifest
from mxgitops.runtimes.shared.podtemplate import RenderContext
from mxgitops.runtimes.batch.render import render_job
job = from_manifest(yaml.safe_load(open(sys.argv[1])))
start = time.perf_counter()
objects = render_job(job, RenderContext(instance="bench"))
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"objects": len(objects), "seconds": elapsed, "mib": peak}))
"""


def manifest(servers: int, workers: int) -> dict[str, object]:
    def replica(count: int) -> dict[str, object]:
        container = {
            "name": "mxnet",
            "image": "registry.example.com/ml/mxnet:1.9.1-gpu",
            "args": ["train.py", "--epochs=90", "--kv-store=dist_sync"],
            "resources": {"limits": {"nvidia.com/gpu": 8, "memory": "64Gi"}},
            "env": [{"name": "DATASET", "value": "s3://datasets/imagenet"}],
        }
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {"spec": {"containers": [container]}},
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": "imagenet-5k"},
        "spec": {
            "jobMode": "MXTrain",
            "mxReplicaSpecs": {
                "Scheduler": replica(1),
                "Server": replica(servers),
                "Worker": replica(workers),
            },
        },
    }


def measured(argv: list[str], env: dict[str, str]) -> tuple[str, float, float, int]:
    """stdout, wall seconds, peak RSS in MiB and exit status of one child process."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.perf_counter() - start
        out.seek(0)
        return out.read().decode(), elapsed, usage.ru_maxrss / 1024, child.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=5_000)
    parser.add_argument("--servers", type=int, default=16)
    parser.add_argument("--budget", type=float, default=10.0, help="seconds")
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory(prefix="mxgitops-bench-") as directory:
        root = Path(directory)
        repo = root / "jobs"
        repo.mkdir()
        path = repo / "imagenet-5k.yaml"
        path.write_text(yaml.safe_dump(manifest(args.servers, args.workers)))
        # No kubeconfig anywhere: the dry run plans against an empty cluster.
        env = {**os.environ, "HOME": str(root), "KUBECONFIG": str(root / "none")}
        env.pop("KUBERNETES_SERVICE_HOST", None)

        out, wall, mib, status = measured([sys.executable, "-c", RENDER, str(path)], env)
        render = json.loads(out) if status == 0 else {}
        print(
            f"render_job: {render.get('objects')} objects in {render.get('seconds', 0):.2f} s, "
            f"peak RSS {render.get('mib', 0):.0f} MiB (process {wall:.2f} s)"
        )
        failed |= status != 0 or render["seconds"] > args.budget or render["mib"] > MAX_RSS_MIB

        argv = [*command(), "sync", "--dry-run", "--repo", str(repo), "--output", "json"]
        out, wall, mib, status = measured(argv, env)
        jobs = json.loads(out).get("jobs", []) if out.startswith("{") else []
        creates = [len(j.get("objects", ())) for j in jobs if j.get("action") == "create"]
        print(
            f"mxgitops sync --dry-run: {args.workers} workers, {args.servers} servers: "
            f"{wall:.2f} s wall, peak RSS {mib:.0f} MiB, {sum(creates)} objects to create"
        )
        failed |= status != 0 or not creates or wall > args.budget or mib > MAX_RSS_MIB
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
