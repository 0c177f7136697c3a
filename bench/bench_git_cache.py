"""How much the cache saves: first sync (clone) versus later syncs (fetch only).

Builds a remote with 5,000 commits touching 1,000 manifests (with `git fast-import`, in a
second or two), then times `Repository.sync()`: the first run clones and checks out, the
next ones find no new commit and must only fetch, one more picks up a single new commit.
Target: a sync with no new commit takes under a fifth of the first sync.

    python bench/bench_git_cache.py [--commits 5000] [--manifests 1000] [--http]

`--http` serves the remote through the loopback smart-HTTP server of the tests, with a
token, instead of a file:// URL. Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mxgitops.source.gitauth import Credentials
from mxgitops.source.repository import Repository

_IDENTITY = "Bench <bench@example.com>"


Render = Callable[[int, int], bytes]  # (manifest index, revision) -> file content


def fast_import_stream(commits: int, manifests: int, render: Render) -> Iterator[bytes]:
    """One commit adding every manifest, then commits changing one manifest each."""
    when = 1_700_000_000
    for number in range(commits):
        touched = range(manifests) if number == 0 else [number % manifests]
        yield f"commit refs/heads/main\ncommitter {_IDENTITY} {when + number} +0000\n".encode()
        message = f"change {number}\n".encode()
        yield b"data %d\n%s" % (len(message), message)
        for index in touched:
            body = render(index, number)
            yield b"M 100644 inline jobs/job-%04d.yaml\ndata %d\n%s\n" % (index, len(body), body)
        yield b"\n"


def _manifest(index: int, revision: int) -> bytes:
    return (
        "apiVersion: kubeflow.org/v1\nkind: MXJob\n"
        f"metadata:\n  name: job-{index:04d}\n  annotations:\n    revision: '{revision}'\n"
        "spec:\n  jobMode: MXTrain\n  mxReplicaSpecs:\n    Worker:\n      replicas: 2\n"
    ).encode()


def build_remote(root: Path, commits: int, manifests: int, render: Render = _manifest) -> Path:
    bare = root / "remotes" / "jobs.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(bare)], check=True)
    subprocess.run(["git", "symbolic-ref", "HEAD", "refs/heads/main"], cwd=bare, check=True)
    importer = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=bare, stdin=subprocess.PIPE)
    assert importer.stdin is not None
    for chunk in fast_import_stream(commits, manifests, render):
        importer.stdin.write(chunk)
    importer.stdin.close()
    if importer.wait() != 0:
        raise SystemExit("git fast-import failed")
    subprocess.run(["git", "gc", "--quiet"], cwd=bare, check=True)
    return bare


def add_commit(bare: Path, work: Path) -> None:
    subprocess.run(["git", "clone", "--quiet", bare.as_uri(), str(work)], check=True)
    (work / "jobs" / "job-0000.yaml").write_bytes(_manifest(0, -1))
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    for args in (["commit", "--quiet", "-am", "one more"], ["push", "--quiet"]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True)


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=5000)
    parser.add_argument("--manifests", type=int, default=1000)
    parser.add_argument("--http", action="store_true", help="serve over loopback HTTP")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="mxgitops-bench-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        bare = build_remote(root, options.commits, options.manifests)
        print(
            f"remote: {options.commits} commits, {options.manifests} manifests, "
            f"built in {time.perf_counter() - started:.2f}s"
        )
        url, credentials, stop = bare.as_uri(), Credentials(), _nothing
        if options.http:
            url, credentials, stop = serve_over_http(bare.parent)
        try:
            report(Repository(url, cache_dir=root / "cache", credentials=credentials), bare, root)
        finally:
            stop()


def _nothing() -> None:
    """Stopping a file:// remote takes nothing."""


def serve_over_http(root: Path) -> tuple[str, Credentials, Callable[[], None]]:
    from tests.gitrepos.fixtures import GitHttpServer

    server = GitHttpServer(root=root, logins={("x-access-token", "bench-token")})
    server.start()
    return server.url("jobs"), Credentials(token="bench-token"), server.stop


def report(repository: Repository, bare: Path, root: Path) -> None:
    first = timed(repository.sync)
    unchanged = [timed(repository.sync) for _ in range(5)]
    add_commit(bare, root / "work")
    one_new = timed(repository.sync)
    median = statistics.median(unchanged)
    print(f"first sync (clone + checkout):      {first * 1000:8.1f} ms")
    print(
        f"next sync, no new commit (median):  {median * 1000:8.1f} ms  "
        f"({median / first:.1%} of first; target < 20%)"
    )
    print(f"next sync, one new commit:          {one_new * 1000:8.1f} ms")
    print("PASS" if median < first / 5 else "FAIL: incremental sync is not fast enough")


if __name__ == "__main__":
    main()
