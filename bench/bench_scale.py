"""How a sync scales with the number of jobs, each figure beside its floor, measured
in the same run against the API double (a subprocess).

    python -m bench.bench_scale [JOBS ...]      (default: 100 1000 5000 10000)

Per size, the jobs (dist: 7 batch Jobs and 1 Service each) are created by a first
sync, then each sync runs as its own process, as the CronJob runs it:

- no-op sync (median of 3): wall seconds of the process, of `sync()` inside it,
  requests, peak RSS; against the floor: the same GET requests made with
  http.client and their bodies read, nothing decoded (the "curl floor"); and
  against the least any Python process using the official client can do: start,
  load the kubeconfig through the client, the same GETs, each body decoded by
  json.loads (median of 3);
- one changed manifest (median of 3, a different change each time): wall,
  requests; against the no-op sync's median.

Then `validate` of one file (process wall, median of 5) against `python -c pass`
and against a process that imports PyYAML and parses the file; and `summarize` of
10,000 written jobs against building their 10,000 rows as plain tuples.

Every process runs as the image runs it: mxgitops' byte code compiled once and kept
(here in a directory of the run, PYTHONPYCACHEPREFIX), not compiled from source at
each start, which a development shell's PYTHONDONTWRITEBYTECODE=1 would make it do
(about 0.35 s of CPU a process).

Prints a table, then each ratio beside its target (`TARGETS`); not a test. Targets:
a no-op at 1,000 jobs within 8x its floor as a process, 4x as `sync()` inside it;
at 10,000 within 10x as a process and under 512 MiB; one change <= 1.2x the no-op.
tests/planning/test_noop_cost.py guards the no-op's work per object and per job in CI.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

import yaml

from bench.bench_sync import NS, ROOT, as_the_image_runs, double, manifest, timed_child, write_repo
from mxgitops.kube.listing import METADATA_ONLY
from mxgitops.runtimes.registry import install_hash_shapes

_CHILD = """
import json, resource, sys, time
from pathlib import Path
from mxgitops.runtimes.registry import install_hash_shapes
install_hash_shapes()
from mxgitops.settings.config import SyncConfig
from mxgitops.commands.sync import sync
repo, kubeconfig = sys.argv[1:3]
config = SyncConfig(repo=repo, kubeconfig=Path(kubeconfig), namespace="bench",
                    instance="bench", parallelism=16, cache_dir=Path(repo).parent / "cache")
start = time.perf_counter()
outcome = sync(config)
took = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"ok": outcome.ok, "sync": took, "rss": rss}))
"""


def child_sync(repo: Path, kubeconfig: Path) -> dict[str, Any]:
    return timed_child(_CHILD, str(repo), str(kubeconfig))


def floor(url: str, log: list[dict[str, Any]]) -> float:
    """The same GETs over one connection, bodies read and not decoded; Services asked
    for their metadata alone, as mxgitops asks."""
    target = urllib.parse.urlsplit(url)
    start = time.perf_counter()
    connection = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
    for entry in log:
        connection.request("GET", _url(entry), headers={"Accept": _accept(entry)})
        connection.getresponse().read()
    connection.close()
    return time.perf_counter() - start


# The least a no-op sync in Python can do with the official client: start, load the
# kubeconfig through the client (as any Kubernetes tool does), make the same GETs and
# decode their bodies with the standard library's JSON decoder; nothing else.
_MINIMUM = """
import http.client, json, sys, urllib.parse
import kubernetes
configuration = kubernetes.client.Configuration()
kubernetes.config.load_kube_config(config_file=sys.argv[1], client_configuration=configuration)
server = urllib.parse.urlsplit(configuration.host)
connection = http.client.HTTPConnection(server.hostname, server.port, timeout=120)
for url, accept in json.loads(sys.stdin.read()):
    connection.request("GET", url, headers={"Accept": accept})
    json.loads(connection.getresponse().read())
"""


def client_minimum(kubeconfig: Path, log: list[dict[str, Any]]) -> float:
    """Process wall of `_MINIMUM` for the GETs of `log` (median of 3)."""
    gets = json.dumps([(_url(entry), _accept(entry)) for entry in log])
    times = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", _MINIMUM, str(kubeconfig)], input=gets, text=True, check=True
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _url(entry: dict[str, Any]) -> str:
    query = urllib.parse.urlencode(entry.get("query") or {})
    return str(entry["path"]) + (f"?{query}" if query else "")


def _accept(entry: dict[str, Any]) -> str:
    """Services are asked for their metadata alone, as mxgitops asks."""
    return METADATA_ONLY if entry["path"].endswith("/services") else "application/json"


def scale(jobs: int, tmp: Path) -> dict[str, Any]:
    repo = write_repo(tmp / f"repo-{jobs}", jobs)
    with double(tmp, f"scale-{jobs}") as (api, kubeconfig):
        first = child_sync(repo, kubeconfig)
        noop = []
        for _ in range(3):
            api.clear()
            noop.append(child_sync(repo, kubeconfig))
            log = api.requests()
        gets = [e for e in log if e["method"] == "GET"]
        floors = [floor(api.url, gets) for _ in range(3)]
        minimum = client_minimum(kubeconfig, gets)
        ones, one_requests = [], []
        for workers in (5, 6, 7):  # a different change each time: each sync replaces one job
            changed = manifest(jobs // 2)
            changed["spec"]["mxReplicaSpecs"]["Worker"]["replicas"] = workers
            (repo / f"job-{jobs // 2:04d}.yaml").write_text(yaml.safe_dump(changed))
            api.clear()
            ones.append(child_sync(repo, kubeconfig)["wall"])
            one_requests.append(len(api.requests()))
    noop_wall = statistics.median(r["wall"] for r in noop)
    noop_sync = statistics.median(r["sync"] for r in noop)
    floor_wall = statistics.median(floors)
    return {
        "jobs": jobs,
        "noop_ratio": noop_wall / floor_wall,
        "noop_sync_ratio": noop_sync / floor_wall,
        "first": first["wall"],
        "first_rss": first["rss"],
        "noop": noop_wall,
        "noop_sync": noop_sync,
        "noop_rss": max(r["rss"] for r in noop),
        "requests": len(log),
        "floor": floor_wall,
        "minimum": minimum,
        "one": statistics.median(ones),
        "one_requests": max(one_requests),
    }


# (jobs, what, the row's ratio or figure, the most it may be, its unit)
TARGETS: tuple[tuple[int, str, str, float, str], ...] = (
    (1000, "no-op process / floor", "noop_ratio", 8.0, "x"),
    (1000, "no-op sync() / floor", "noop_sync_ratio", 4.0, "x"),
    (10000, "no-op process / floor", "noop_ratio", 10.0, "x"),
    (10000, "no-op peak RSS", "noop_rss", 512.0, " MiB"),
)


def print_targets(rows: list[dict[str, Any]]) -> None:
    """Each measured figure that has a target, beside it, and whether it is met."""
    by_jobs = {row["jobs"]: row for row in rows}
    for jobs, what, key, most, unit in TARGETS:
        row = by_jobs.get(jobs)
        if row is None:
            continue
        value = row[key]
        verdict = "met" if value <= most else "NOT met"
        print(f"{jobs:,} jobs: {what} {value:.1f}{unit} (target <= {most:g}{unit}: {verdict})")
    for row in rows:
        one = row["one"] / row["noop"]
        verdict = "met" if one <= 1.2 else "NOT met"
        print(f"{row['jobs']:,} jobs: one change / no-op {one:.2f}x (target <= 1.2x: {verdict})")


def process_wall(*args: str, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(args, cwd=ROOT, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def imports_alone() -> float:
    """Process wall of starting Python and importing what a sync with a cluster needs:
    the part of a no-op sync no change to mxgitops' own work can remove."""
    return process_wall(
        sys.executable, "-c", "import mxgitops.commands.sync, mxgitops.kube.cluster, kubernetes"
    )


def validate_one(tmp: Path) -> None:
    path = tmp / "one.yaml"
    path.write_text(yaml.safe_dump(manifest(1)))
    ours = process_wall(sys.executable, "-m", "mxgitops.cli", "validate", str(path))
    bare = process_wall(sys.executable, "-c", "pass")
    parse = process_wall(sys.executable, "-c", f"import yaml; yaml.safe_load(open({str(path)!r}))")
    print(
        f"validate of one file: {ours:.2f} s wall (median of 5; target < 0.3 s); "
        f"{ours / bare:.1f}x `python -c pass` ({bare:.2f} s), "
        f"{ours / parse:.1f}x importing PyYAML and parsing it ({parse:.2f} s)"
    )


def summarize_many(count: int = 10_000) -> None:
    from mxgitops.outputs import report
    from mxgitops.planning.changes import Action, Change, Plan
    from mxgitops.state.apply import ChangeResult, ChangeSet

    changes = tuple(Change(NS, f"job-{n:05d}", Action.CREATE, "new job") for n in range(count))
    changeset = ChangeSet(tuple(ChangeResult(c) for c in changes))
    the_plan = Plan(changes)

    def ours() -> None:
        report.summarize(the_plan, changeset)

    def rows() -> None:
        errors = {r.change.key: r.errors for r in changeset.results}
        [(c.namespace, c.name, c.action.value, errors.get(c.key, ())) for c in changes]

    took = {f.__name__: statistics.median(_timed(f) for _ in range(5)) for f in (ours, rows)}
    print(
        f"summarize of {count:,} written jobs: {took['ours']:.3f} s (median of 5; "
        f"target < 0.2 s), {took['ours'] / took['rows']:.1f}x building plain rows "
        f"({took['rows']:.3f} s)"
    )


def _timed(action: Any) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main(sizes: list[int]) -> None:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        as_the_image_runs(tmp)
        validate_one(tmp)
        summarize_many()
        print(
            "\n| jobs | first sync s | no-op s (process) | no-op s (sync()) | requests "
            "| floor s | no-op / floor | peak RSS MiB | one change s | one / no-op "
            "| one change requests | load |"
        )
        print("|" + "---|" * 12)
        rows = []
        for jobs in sizes:
            row = scale(jobs, tmp / str(jobs))
            rows.append(row)
            print(
                f"| {jobs:,} | {row['first']:.1f} | {row['noop']:.2f} | {row['noop_sync']:.2f} "
                f"| {row['requests']} | {row['floor']:.2f} | {row['noop'] / row['floor']:.1f}x "
                f"| {row['noop_rss']:.0f} | {row['one']:.2f} | {row['one'] / row['noop']:.2f}x "
                f"| {row['one_requests']} | {os.getloadavg()[0]:.1f} |",
                flush=True,
            )
        startup = imports_alone()
        print(
            f"\nstarting Python and importing a sync's modules (the Kubernetes client among "
            f"them) alone: {startup:.2f} s (median of 5)"
        )
        for row in rows:
            print(
                f"{row['jobs']:,} jobs: the least a Python process can do with the official "
                f"client (start, load the kubeconfig through it, the same GETs, json.loads of "
                f"each body): {row['minimum']:.2f} s, {row['minimum'] / row['floor']:.1f}x the "
                f"floor; mxgitops' no-op is {row['noop'] / row['minimum']:.1f}x that"
            )
            print(
                f"{row['jobs']:,} jobs: no-op without that start: {row['noop'] - startup:.2f} s, "
                f"{(row['noop'] - startup) / row['floor']:.1f}x the floor; the start alone "
                f"is {startup / row['floor']:.1f}x the floor"
            )
        print()
        print_targets(rows)
        base = rows[0]
        for row in rows[1:]:
            growth = row["jobs"] / base["jobs"]
            print(
                f"{row['jobs']:,} vs {base['jobs']:,} jobs ({growth:.0f}x): no-op time "
                f"{row['noop_sync'] / base['noop_sync']:.1f}x, peak RSS "
                f"{row['noop_rss'] / base['noop_rss']:.1f}x"
            )


if __name__ == "__main__":
    install_hash_shapes()  # this script is an entry point: see the registry
    main([int(a) for a in sys.argv[1:]] or [100, 1000, 5000, 10000])
