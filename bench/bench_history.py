"""How long `mxgitops history` takes over 200 commits of a job's history, beside `git log`.

Builds a remote whose `main` has N commits (200 by default), each changing one job's
learning rate and another job's image, every commit with a status note holding the job's
run and its 10-epoch training record (`git fast-import`, about a second), syncs a cache
clone of it once, then times, 5 times each (the median printed):

- `runs_of`: what `mxgitops history` does (the cache's fetch under its lock, the walk,
  the notes), and `runs_at`: the walk and the notes alone;
- `git log --first-parent --raw` of the same range in the same cache, as the yardstick.

Target: `runs_of` under 2 s for 200 commits (issue #45).

    python bench/bench_history.py [--commits 200] [--others 20]

Prints figures; not a test (tests/test_history_cost.py guards the number of git
processes, which is what makes it fast).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mxgitops.commands.history import runs_at, runs_of
from mxgitops.source.repository import Repository
from tests.gitrepos.fixtures import isolate_git
from tests.helpers.history import NOTES_REF, NS, built_history

TARGET_SECONDS = 2.0


def median_of(action: Callable[[], object], times: int = 5) -> float:
    spent = []
    for _ in range(times):
        start = time.perf_counter()
        action()
        spent.append(time.perf_counter() - start)
    return statistics.median(spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--others", type=int, default=20, help="other jobs changed in turn")
    options = parser.parse_args()

    with (
        tempfile.TemporaryDirectory(prefix="mxgitops-bench-") as tmp,
        pytest.MonkeyPatch.context() as patch,
    ):
        root = Path(tmp)
        isolate_git(patch, root)
        started = time.perf_counter()
        bare = built_history(root, options.commits, others=options.others)
        built = time.perf_counter() - started
        print(f"remote: {options.commits} commits with notes, built in {built:.2f}s")
        repository = Repository(bare.as_uri(), cache_dir=root / "cache")
        with repository.locked():
            tip = repository.sync("main").commit
        ask = {"notes_ref": NOTES_REF, "namespace": NS, "name": "mnist"}
        found = runs_of(repository, branch="main", **ask)
        assert len(found) == min(options.commits, 200), len(found)
        whole = median_of(lambda: runs_of(repository, branch="main", **ask))
        walk = median_of(lambda: runs_at(repository.reader(), tip, **ask))
        log = median_of(
            lambda: subprocess.run(
                ["git", "log", "--first-parent", "--raw", "--no-abbrev", tip],
                cwd=repository.path,
                check=True,
                capture_output=True,
            )
        )
        print(f"git log --first-parent --raw (same range):  {log * 1000:8.1f} ms")
        for what, spent in (
            ("runs_at (the walk and the notes):", walk),
            ("runs_of (mxgitops history: fetch + walk):", whole),
        ):
            print(f"{what:<44}{spent * 1000:8.1f} ms  ({spent / log:.1f}x git log)")
        print("PASS" if whole < TARGET_SECONDS else f"FAIL: over {TARGET_SECONDS:g} s")


if __name__ == "__main__":
    main()
