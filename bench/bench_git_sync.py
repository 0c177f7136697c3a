"""A whole dry-run sync from Git: first run (clone + validate 1,000 manifests) versus a
second run with no new commit (fetch only, cache reused).

Builds a bare remote with 5,000 commits touching 1,000 MxJob manifests with
`git fast-import` (a second or two), then times `mxgitops.sync.sync(dry_run=True)` with no
cluster configured (so it plans against an empty cluster). Target: the second sync under a
fifth of the first. Prints figures; not a test.

    python bench/bench_git_sync.py [--commits 5000] [--manifests 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mxgitops import manifests
from mxgitops.config import SyncConfig
from mxgitops.sync import sync

_IDENTITY = "Bench <bench@example.com>"


def manifest(index: int, revision: int) -> bytes:
    return f"""apiVersion: mxnet.mlkube.io/v1beta1
kind: MxJob
metadata:
  name: job-{index:04d}
spec:
  jobMode: local
  replicaSpecs:
    - replicas: 1
      mxReplicaType: WORKER
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - name: mxnet
              image: mxnet/python:1.9.1
              args: ["train.py", "--revision={revision}"]
""".encode()


def fast_import_stream(commits: int, manifests: int) -> Iterator[bytes]:
    """One commit adding every manifest, then commits changing one manifest each."""
    when = 1_700_000_000
    for number in range(commits):
        touched = range(manifests) if number == 0 else [number % manifests]
        yield f"commit refs/heads/main\ncommitter {_IDENTITY} {when + number} +0000\n".encode()
        message = f"change {number}\n".encode()
        yield b"data %d\n%s" % (len(message), message)
        for index in touched:
            body = manifest(index, number)
            yield b"M 100644 inline jobs/job-%04d.yaml\ndata %d\n%s\n" % (index, len(body), body)
        yield b"\n"


def build_remote(path: Path, commits: int, manifests: int) -> None:
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(path)], check=True)
    process = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=path, stdin=subprocess.PIPE)
    assert process.stdin is not None
    for chunk in fast_import_stream(commits, manifests):
        process.stdin.write(chunk)
    process.stdin.close()
    if process.wait() != 0:
        raise SystemExit("git fast-import failed")


def timed(config: SyncConfig) -> tuple[float, bool, int]:
    started = time.perf_counter()
    outcome = sync(config)
    elapsed = time.perf_counter() - started
    assert outcome.workspace.checkout is not None
    return elapsed, outcome.workspace.checkout.cloned, len(outcome.summary.jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=5000)
    parser.add_argument("--manifests", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mxgitops-bench-") as scratch:
        root = Path(scratch)
        # No cluster anywhere: the dry run plans against an empty cluster.
        os.environ.pop("KUBECONFIG", None)
        os.environ.pop("KUBERNETES_SERVICE_HOST", None)
        os.environ["HOME"] = str(root / "home")
        os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
        os.environ["GIT_CONFIG_GLOBAL"] = str(root / "gitconfig")
        (root / "gitconfig").write_text('[protocol "file"]\n\tallow = always\n')

        started = time.perf_counter()
        build_remote(root / "remote.git", args.commits, args.manifests)
        built = time.perf_counter() - started
        print(f"remote: {args.commits} commits, {args.manifests} manifests, built in {built:.2f} s")

        # Load the schemas once before timing, so the first sync is not charged for it.
        (root / "warm").mkdir()
        (root / "warm" / "job.yaml").write_bytes(manifest(0, 0))
        assert manifests.load([root / "warm"], default_namespace="default").ok

        config = SyncConfig(
            repo=(root / "remote.git").as_uri(),
            path="jobs",
            cache_dir=root / "cache",
            dry_run=True,
        )
        first, cloned, jobs = timed(config)
        assert cloned, "the first sync should clone"
        print(f"first dry-run sync (clone, {jobs} jobs planned): {first:.3f} s")
        later = []
        for _ in range(args.repeat):
            elapsed, cloned, _jobs = timed(config)
            assert not cloned, "a sync with no new commit should reuse the cache"
            later.append(elapsed)
        second = statistics.median(later)
        print(
            f"dry-run sync, no new commit (median of {args.repeat}): {second:.3f} s "
            f"[{', '.join(f'{t:.3f}' for t in later)}]"
        )
        ratio = second / first
        verdict = "met" if ratio < 0.2 else "NOT met"
        print(f"ratio second/first: {ratio:.2f} (target < 0.20: {verdict})")


if __name__ == "__main__":
    main()
