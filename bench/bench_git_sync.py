"""A whole sync from Git: the first run (clone, validate 1,000 manifests, create the
jobs) versus a run with no new commit (fetch only, cache reused, nothing to write).

Builds a bare remote with 5,000 commits touching 1,000 MxJob manifests with
`git fast-import` (packed, as a server holds it), then times `mxgitops.commands.sync.sync`
twice over: against the API double (`python -m tests.kubeapi` in a subprocess), and
as a dry run with no cluster configured (plans against an empty cluster). Target: a
sync with no new commit under a fifth of the first. Prints figures; not a test.

    python bench/bench_git_sync.py [--commits 5000] [--manifests 1000] [--repeat 3] [--http]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_git_cache import _nothing, build_remote, serve_over_http
from bench.bench_sync import NS, double
from mxgitops.commands.sync import sync
from mxgitops.manifests import loading as manifests
from mxgitops.runtimes.registry import install_hash_shapes
from mxgitops.settings.config import SyncConfig


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


def timed(config: SyncConfig) -> tuple[float, bool, int]:
    started = time.perf_counter()
    outcome = sync(config)
    elapsed = time.perf_counter() - started
    assert outcome.ok and outcome.workspace.checkout is not None
    return elapsed, outcome.workspace.checkout.cloned, len(outcome.summary.jobs)


def compare(label: str, config: SyncConfig, repeat: int) -> None:
    """Time a first sync (it clones) against `repeat` more with no new commit."""
    first, cloned, jobs = timed(config)
    assert cloned, "the first sync should clone"
    later = []
    for _ in range(repeat):
        elapsed, cloned, _jobs = timed(config)
        assert not cloned, "a sync with no new commit should reuse the cache"
        later.append(elapsed)
    second = statistics.median(later)
    verdict = "met" if second < first / 5 else "NOT met"
    print(
        f"{label}: first sync {first:.3f} s ({jobs} jobs), no new commit {second:.3f} s "
        f"(median of {repeat}), ratio {second / first:.2f} (target < 0.20: {verdict})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=5000)
    parser.add_argument("--manifests", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--http", action="store_true", help="serve over loopback HTTP")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mxgitops-bench-") as scratch:
        root = Path(scratch)
        os.environ.pop("KUBECONFIG", None)  # the dry run plans against an empty cluster
        os.environ.pop("KUBERNETES_SERVICE_HOST", None)
        os.environ["HOME"] = str(root / "home")
        os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
        os.environ["GIT_CONFIG_GLOBAL"] = str(root / "gitconfig")
        (root / "gitconfig").write_text('[protocol "file"]\n\tallow = always\n')

        started = time.perf_counter()
        remote = build_remote(root, args.commits, args.manifests, render=manifest)
        built = time.perf_counter() - started
        print(f"remote: {args.commits} commits, {args.manifests} manifests, built in {built:.2f} s")

        # Load the schemas once before timing, so the first sync is not charged for it.
        (root / "warm").mkdir()
        (root / "warm" / "job.yaml").write_bytes(manifest(0, 0))
        assert manifests.load([root / "warm"], default_namespace="default").ok

        url, token, stop = remote.as_uri(), None, _nothing
        if args.http:
            url, credentials, stop = serve_over_http(remote.parent)
            token = credentials.token
        base = SyncConfig(repo=url, git_token=token, path="jobs", namespace=NS)
        try:
            with double(root, "cluster") as (_api, kubeconfig):
                config = replace(base, kubeconfig=kubeconfig, cache_dir=root / "cache-sync")
                compare("sync against the API double", config, args.repeat)
            config = replace(base, dry_run=True, cache_dir=root / "cache-dry-run")
            compare("dry run, no cluster", config, args.repeat)
        finally:
            stop()


if __name__ == "__main__":
    install_hash_shapes()  # this script is an entry point: see the registry
    main()
