#!/usr/bin/env python3
"""The dashboard's jobs page for 10,000 jobs: its median time, beside `status`'s.

A bare repository in a scratch directory gets one commit and one note of `--jobs` jobs
(a tenth failed with a log tail, a tenth queued, the rest running or finished), each
with the training record MXNet 1.9.1's own log gives (tests/data/training-logs). Then:

- the installed `mxgitops dashboard` serves it on loopback; once /healthz answers, the
  jobs page (`/`, the first page of 50), a filtered one (`/?state=Failed`) and the last
  page are each fetched `--requests` times: the median and the 95th percentile of each,
  in milliseconds (loopback HTTP: the server's time and a fraction of a millisecond);
  a job's page, first (its runs read from the notes) and again (cached);
  the server's peak memory (VmHWM) after it, against the Deployment's limit;
- the installed `mxgitops status` of the same commit, `--runs` times: its median wall
  time (a fresh process each: its start included, as a person running it sees it).

    .venv/bin/python bench/bench_dashboard.py [--jobs 10000] [--requests 50] [--runs 3]

Prints one line per figure and the ratio of status's median to the jobs page's; exits 1
when the jobs page's median is over `--budget` ms (300) or the memory over 512 MiB
(cronjob/components/dashboard/deployment.yaml's limit).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mxgitops.outputs import report  # noqa: E402
from mxgitops.outputs.summary import JobSummary, Summary  # noqa: E402
from mxgitops.record.resources import ResourceUse  # noqa: E402
from mxgitops.record.runrecord import TrainingRecord  # noqa: E402

LIMIT_MIB = 512
LOG = ROOT / "tests" / "data" / "training-logs" / "mxnet-1.9.1-module-fit.log"
MXGITOPS = Path(sys.executable).with_name("mxgitops")
MANIFEST = """apiVersion: kubeflow.org/v1
kind: MXJob
metadata: {name: job-00003, namespace: team-3}
spec:
  jobMode: MXTrain
  mxReplicaSpecs:
    Worker:
      replicas: 1
      template:
        spec:
          containers: [{name: mxnet, image: mxnet/python:1.9.1, args: [train.py]}]
"""


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def note_of(commit: str, jobs: int) -> str:
    use = ResourceUse(1.0, 4.0, 1, False, started="2026-12-07T02:00:00Z")
    record = TrainingRecord(declared_epochs=10, resources=use).with_chunk(LOG.read_text())
    summaries = []
    for n in range(jobs):
        kind = n % 10
        state = {0: "Failed", 1: "Queued", 2: "Succeeded"}.get(kind, "Running")
        failure = None
        if state == "Failed":
            failure = {"replica": "WORKER 0", "exit_code": 1, "reason": "Error",
                       "log": "Traceback (most recent call last):\n" * 20}  # fmt: skip
        summaries.append(
            JobSummary(
                namespace=f"team-{n % 20}",
                name=f"job-{n:05d}",
                action="create",
                reason="new job",
                state=state,
                commit=commit,
                state_reason="waiting for quota" if state == "Queued" else "",
                failure=failure,
                record=record if state != "Queued" else None,
            )
        )
    summary = Summary(commit=commit, instance="bench", jobs=tuple(summaries),
                      synced_at="2026-12-07T03:00:00Z")  # fmt: skip
    return report.render_note(summary)


def repository(scratch: Path, jobs: int) -> str:
    bare, work = scratch / "jobs.git", scratch / "work"
    git("init", "--quiet", "--bare", "--initial-branch=main", str(bare), cwd=scratch)
    git("clone", "--quiet", bare.as_uri(), str(work), cwd=scratch)
    (work / "README.md").write_text("jobs\n")
    (work / "jobs").mkdir()
    (work / "jobs" / "job-00003.yaml").write_text(MANIFEST)  # one job whose page is timed
    git("add", ".", cwd=work)
    git("-c", "user.name=bench", "-c", "user.email=b@example.com", "commit", "-qm", "jobs",
        cwd=work)  # fmt: skip
    git("push", "--quiet", "origin", "HEAD:main", cwd=work)
    commit = git("rev-parse", "HEAD", cwd=work)
    text = note_of(commit, jobs)
    (scratch / "note.txt").write_text(text)
    git("notes", "--ref=refs/notes/mxgitops", "add", "-F", str(scratch / "note.txt"), commit,
        cwd=work)  # fmt: skip
    git("push", "--quiet", "origin", "refs/notes/mxgitops", cwd=work)
    print(f"note: {len(text) / 2**20:.1f} MiB for {jobs:,} jobs")
    return bare.as_uri()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed_get(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as answer:
        answer.read()
    return (time.perf_counter() - start) * 1000


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget", type=float, default=300.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mxgitops-bench-dashboard-") as name:
        scratch = Path(name)
        url = repository(scratch, args.jobs)
        env = {**os.environ, "MXGITOPS_CACHE_DIR": str(scratch / "cache")}
        port = free_port()
        started = time.perf_counter()
        server = subprocess.Popen(
            [str(MXGITOPS), "dashboard", "--listen", f"127.0.0.1:{port}", "--repo", url,
             "--branch", "main", "--refresh", "3600"],
            env=env, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while True:
                try:
                    with urllib.request.urlopen(f"{base}/healthz", timeout=5) as answer:
                        if answer.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    print("the dashboard did not read the branch within 300 s")
                    return 1
                time.sleep(0.05)  # polling a condition (its first read), with a deadline
            print(f"first read: {time.perf_counter() - started:.2f} s (start, fetch, parse)")
            medians = {}
            for label, path in (
                ("jobs page", "/"),
                ("filtered", "/?state=Failed"),
                ("last page", f"/?page={args.jobs // 50}"),
            ):
                times = sorted(timed_get(base + path) for _ in range(args.requests))
                medians[label] = statistics.median(times)
                p95 = times[int(0.95 * (len(times) - 1))]
                print(f"dashboard {label:9}: median {medians[label]:.1f} ms, p95 {p95:.1f} ms")
            job = f"{base}/jobs/team-3/job-00003"  # a running job with its record
            print(f"dashboard job page: first {timed_get(job):.0f} ms (its runs read), "
                  f"then {statistics.median(timed_get(job) for _ in range(5)):.1f} ms")  # fmt: skip
            memory = peak_mib(server.pid)
            print(f"dashboard memory: {memory:.0f} MiB peak (limit {LIMIT_MIB} MiB)")
        finally:
            server.terminate()
            server.wait(timeout=30)
        status_env = {**env, "MXGITOPS_CACHE_DIR": str(scratch / "status-cache")}
        walls = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run([str(MXGITOPS), "status", "--repo", url, "--branch", "main"],
                           env=status_env, check=True, capture_output=True)  # fmt: skip
            walls.append((time.perf_counter() - start) * 1000)
        status = statistics.median(walls)
        print(f"status: median {status:.0f} ms (a fresh process, its fetch included)")
        print(f"ratio: status / jobs page = {status / medians['jobs page']:.1f}")
    ok = medians["jobs page"] <= args.budget and memory <= LIMIT_MIB
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
