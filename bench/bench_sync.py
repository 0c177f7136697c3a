"""Benchmark `sync()` against the API double, run as a subprocess (no shared GIL),
or against the real control plane.

    python -m bench.bench_sync [JOBS]
    python -m bench.bench_sync --backend real [JOBS]

(a) A no-op sync of JOBS dist jobs (1 scheduler, 2 servers, 4 workers each:
    7 Jobs and 1 Service per job): API requests, writes and wall time.
    Targets: at most 4 requests (3 LISTs + the ledger read), no write, < 5 s.
(b) The first sync of the same jobs with 5 ms added to every request (the
    double's delay fault), at parallelism 1, 8 and 16 (16 the default,
    `--parallelism`'s, as the CronJob runs it), and `kubectl create -f` of the same
    objects (the control plane's kubectl). These syncs run in this process, one after
    another: the first validates the manifests and imports the Kubernetes client for
    all. So also a first sync as the CronJob starts it: a new process, no verdict kept,
    its byte code compiled as the image keeps it (`as_the_image_runs`).
    Target: at least 8 times faster than kubectl create.

With ``--backend real``: etcd and kube-apiserver of tests/controlplane (no
controllers: 7,000 pods started by the job controller would only add noise),
requests counted from the API server's audit log. (a) the first sync and (b) a
no-op sync of JOBS dist jobs, each beside `kubectl apply -f` of the same rendered
objects (into another namespace) in the same run: requests and seconds.

Prints figures; not a test.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from mxgitops.commands.sync import SyncOutcome, sync
from mxgitops.kube.calls import DEFAULT_PARALLELISM
from mxgitops.runtimes.registry import install_hash_shapes
from mxgitops.settings.config import SyncConfig

ROOT = Path(__file__).resolve().parents[1]
NS = "bench"


def manifest(index: int) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        container = {"name": "mxnet", "image": "mxnet/python:1.9.1", "args": [f"--job={index}"]}
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {"spec": {"containers": [container]}},
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": f"job-{index:04d}"},
        "spec": {
            "jobMode": "MXTrain",
            "mxReplicaSpecs": {"Scheduler": replica(1), "Server": replica(2), "Worker": replica(4)},
        },
    }


def write_repo(root: Path, jobs: int) -> Path:
    root.mkdir(parents=True)
    for i in range(jobs):
        (root / f"job-{i:04d}.yaml").write_text(yaml.safe_dump(manifest(i)))
    return root


class Double:
    """`python -m tests.kubeapi` in a subprocess, driven over its /_kubeapi endpoints."""

    def __init__(self, url: str, pid: int) -> None:
        self.url = url
        self.pid = pid

    def cpu_seconds(self) -> float:
        """The double's CPU time so far (user + system, from /proc; 0 where there is none)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"{self.url}/_kubeapi/{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read()
        return json.loads(text) if text.strip() else None

    def requests(self) -> list[dict[str, Any]]:
        body = self._call("GET", "requests")
        return body["items"] if isinstance(body, dict) else body

    def clear(self) -> None:
        self._call("DELETE", "requests")

    def count(self, plural: str) -> int:
        body = self._call("GET", f"objects/{plural}?namespace={NS}")
        return len(body["items"] if isinstance(body, dict) else body)


@contextmanager
def double(tmp: Path, name: str, faults: str = "") -> Iterator[tuple[Double, Path]]:
    kubeconfig = tmp / f"{name}.kubeconfig"
    command = [sys.executable, "-m", "tests.kubeapi", "--kubeconfig", str(kubeconfig)]
    if faults:
        command += ["--faults", faults]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("ready "):
            raise RuntimeError(f"the API double did not start: {line!r}")
        yield Double(line.split()[1], process.pid), kubeconfig
    finally:
        process.terminate()
        process.wait(timeout=10)


def run(repo: Path, kubeconfig: Path, parallelism: int) -> tuple[SyncOutcome, float]:
    config = SyncConfig(
        repo=str(repo),
        kubeconfig=kubeconfig,
        namespace=NS,
        instance="bench",
        parallelism=parallelism,
        cache_dir=repo.parent / "cache",
    )
    start = time.perf_counter()
    outcome = sync(config)
    return outcome, time.perf_counter() - start


def check_created(outcome: SyncOutcome, api: Double, jobs: int) -> None:
    assert outcome.ok, [e for j in outcome.summary.jobs for e in j.errors][:3]
    assert api.count("jobs") == 7 * jobs and api.count("services") == jobs


def audited(audit_log: Path, since: int) -> list[dict[str, Any]]:
    """Requests of the benchmark's client identity in the audit log after byte ``since``."""
    from tests.controlplane.launcher import CLIENT

    with audit_log.open("rb") as log:
        log.seek(since)
        events = [json.loads(line) for line in log if line.strip()]
    return [
        e for e in events if e["user"]["username"] == CLIENT and e["stage"] == "ResponseComplete"
    ]


def rendered_objects(repo: Path, namespace: str) -> list[dict[str, Any]]:
    """What mxgitops creates, for kubectl to apply: under another instance label, so that
    the benchmarked instance never sees these copies as its own."""
    from mxgitops.manifests import loading as manifests
    from mxgitops.runtimes.batch.render import render_job
    from mxgitops.runtimes.shared.podtemplate import RenderContext

    loaded = manifests.load([repo], default_namespace=NS)
    context = RenderContext(instance="kubectl-copy")
    objects = [o for job in loaded.jobs for o in render_job(job, context)]
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
    return objects


def main_real(jobs: int) -> None:
    from tests.controlplane.launcher import ControlPlane
    from tests.controlplane.rest import Rest

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        repo = write_repo(tmp / "repo", jobs)
        print(f"{jobs} dist jobs: {7 * jobs} batch Jobs and {jobs} Services, real kube-apiserver")
        with ControlPlane(tmp / "plane", controllers=False) as plane:
            assert plane.pki and plane.admin and plane.audit_log
            admin = Rest(plane.url, plane.pki.ca, plane.admin.cert, plane.admin.key)
            for namespace in (NS, "bench-kubectl"):
                admin.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
            kubeconfig = plane.kubeconfig(tmp / "kubeconfig")
            # JSON, not YAML: PyYAML leaves a runtime id such as 1e5 unquoted, which
            # kubectl's YAML reads as a number.
            objects = tmp / "objects.json"
            items = rendered_objects(repo, "bench-kubectl")
            objects.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))

            def measure(what: str, action: Any) -> tuple[int, float]:
                since = plane.audit_log.stat().st_size  # type: ignore[union-attr]
                start = time.perf_counter()
                action()
                elapsed = time.perf_counter() - start
                requests = len(audited(plane.audit_log, since))  # type: ignore[arg-type]
                print(f"  {what}: {requests} requests, {elapsed:.2f} s")
                return requests, elapsed

            def mxgitops_sync() -> None:
                outcome = run(repo, kubeconfig, 16)[0]
                assert outcome.ok, [e for j in outcome.summary.jobs for e in j.errors][:3]

            def kubectl_apply() -> None:
                subprocess.run(
                    ["kubectl", "--kubeconfig", str(kubeconfig), "apply", "-f", str(objects)],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )

            for title in ("(a) first sync, parallelism 16", "(b) no-op: the same again"):
                print(title)
                ours = measure("mxgitops sync", mxgitops_sync)
                theirs = measure("kubectl apply -f", kubectl_apply)
                print(
                    f"  kubectl / mxgitops: {theirs[1] / ours[1]:.1f}x the time, "
                    f"{theirs[0] / ours[0]:.1f}x the requests"
                )


def main(jobs: int = 1000) -> None:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        repo = write_repo(tmp / "repo", jobs)
        print(f"{jobs} dist jobs: {7 * jobs} batch Jobs and {jobs} Services")

        with double(tmp, "a") as (api, kubeconfig):
            outcome, first = run(repo, kubeconfig, 16)
            check_created(outcome, api, jobs)
            print(f"(a) setup: first sync (parallelism 16, no delay) {first:.2f} s")
            times, counts = [], []
            for _ in range(3):
                api.clear()
                outcome, elapsed = run(repo, kubeconfig, 16)
                log = api.requests()
                writes = [e for e in log if e["method"] in ("POST", "PUT", "PATCH", "DELETE")]
                assert outcome.ok and not writes, writes[:3]
                times.append(elapsed)
                counts.append(len(log))
            kinds = Counter(f"{e['verb']} {e['resource']}" for e in log)
            print(
                f"(a) no-op sync: {max(counts)} requests ({dict(kinds)}), 0 writes, "
                f"wall {statistics.median(times):.2f} s median of 3 "
                f"(min {min(times):.2f}, max {max(times):.2f}); "
                f"targets: <= 4 requests, no write, < 5 s"
            )

        results = {}
        for parallelism in sorted({1, 8, DEFAULT_PARALLELISM, 16}):
            with double(tmp, f"b{parallelism}", faults="*:delay=5ms") as (api, kubeconfig):
                client, served = time.process_time(), api.cpu_seconds()
                outcome, elapsed = run(repo, kubeconfig, parallelism)
                client, served = time.process_time() - client, api.cpu_seconds() - served
                check_created(outcome, api, jobs)
                results[parallelism] = elapsed
                requests = len(api.requests())
                print(
                    f"(b) first sync, 5 ms per request, parallelism {parallelism:>2}: "
                    f"{elapsed:.2f} s, {requests} requests; CPU: the sync {client:.2f} s "
                    f"(all of it, validation and planning too), the double {served:.2f} s "
                    f"({served / requests * 1000:.2f} ms per request)"
                )
        print(f"(b) speed-up 16 vs 1: {results[1] / results[16]:.1f}x")
        as_the_image_runs(tmp)
        with double(tmp, "b-warm") as (api, kubeconfig):  # the byte code of its imports kept
            first_sync_process(repo, kubeconfig, tmp / "b-warm-cache")
        with double(tmp, "b-process", faults="*:delay=5ms") as (api, kubeconfig):
            fresh = first_sync_process(repo, kubeconfig, tmp / "b-process-cache")
            assert api.count("jobs") == 7 * jobs, "the process's first sync created too little"
            print(
                f"(b) first sync as the CronJob starts it (a new process, no verdict kept, "
                f"default parallelism {DEFAULT_PARALLELISM}), 5 ms per request: process "
                f"{fresh['wall']:.2f} s, `sync()` inside it {fresh['sync']:.2f} s"
            )
        with double(tmp, "b-kubectl", faults="*:delay=5ms") as (api, kubeconfig):
            served = api.cpu_seconds()
            elapsed = kubectl_create(tmp, repo, kubeconfig)
            served = api.cpu_seconds() - served
            requests = len(api.requests())
            print(
                f"(b) kubectl create -f of the same objects, 5 ms per request: {elapsed:.2f} s, "
                f"{requests} requests; CPU: the double {served:.2f} s "
                f"({served / requests * 1000:.2f} ms per request)"
            )
        for parallelism in sorted({8, DEFAULT_PARALLELISM, 16}):
            default = " (the default)" if parallelism == DEFAULT_PARALLELISM else ""
            against_kubectl(f"parallelism {parallelism}{default}", elapsed / results[parallelism])
        against_kubectl("as the CronJob starts it", elapsed / fresh["wall"])


def against_kubectl(what: str, faster: float) -> None:
    print(
        f"(b) mxgitops {what} vs kubectl create -f: {faster:.1f}x faster (target >= 8x: "
        f"{'met' if faster >= 8 else 'NOT met'}; load {os.getloadavg()[0]:.1f})"
    )


_FIRST_SYNC = """
import json, sys, time
from pathlib import Path
from mxgitops.runtimes.registry import install_hash_shapes
install_hash_shapes()
from mxgitops.settings.config import SyncConfig
from mxgitops.commands.sync import sync
repo, kubeconfig, cache = sys.argv[1:4]
config = SyncConfig(repo=repo, kubeconfig=Path(kubeconfig), namespace="bench",
                    instance="bench", cache_dir=Path(cache))
start = time.perf_counter()
outcome = sync(config)
print(json.dumps({"ok": outcome.ok, "sync": time.perf_counter() - start}))
"""


def first_sync_process(repo: Path, kubeconfig: Path, cache: Path) -> dict[str, Any]:
    """A first sync as the CronJob runs it: its own process, at the default parallelism,
    no verdict kept from an earlier sync (the runs above validate in the first alone);
    its process's and its `sync()`'s wall seconds."""
    return timed_child(_FIRST_SYNC, str(repo), str(kubeconfig), str(cache))


def as_the_image_runs(tmp: Path) -> None:
    """Byte code compiled once and kept for every process of the run, as the image keeps
    it (compiled at install), wherever this shell says not to write it (a development
    shell's PYTHONDONTWRITEBYTECODE=1 makes each process compile mxgitops from source:
    about 0.15 s of a first sync's start). The byte code of what mxgitops imports is
    kept there too by the first process that imports it: a process timed runs after
    one that did."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "mxgitops")], check=True)


def timed_child(script: str, *args: str) -> dict[str, Any]:
    """What `script`, a sync run in a Python process of its own from the checkout,
    prints as its last line (JSON, with `ok`), and the process's wall seconds (`wall`)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall"] = time.perf_counter() - start
    if not result["ok"]:
        raise RuntimeError(f"the sync failed: {done.stdout[-2000:]}")
    return result


def kubectl_create(tmp: Path, repo: Path, kubeconfig: Path) -> float:
    """`kubectl create -f` of the objects mxgitops creates (the built kubectl of
    tests/controlplane), into a namespace of their own; its wall seconds. Without
    client-side validation (the double serves no OpenAPI): kubectl at its fastest."""
    from tests.controlplane.build import ensure_built

    objects = tmp / "objects.json"
    items = rendered_objects(repo, "bench-kubectl")
    # JSON, not YAML: PyYAML leaves a runtime id such as 1e5 unquoted, a number to kubectl.
    objects.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    kubectl = ensure_built() / "kubectl"
    start = time.perf_counter()
    subprocess.run(
        [
            str(kubectl),
            "--kubeconfig",
            str(kubeconfig),
            "create",
            "--validate=false",
            "-f",
            str(objects),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


if __name__ == "__main__":
    install_hash_shapes()  # this script is an entry point: see the registry
    args = sys.argv[1:]
    real = args[:2] == ["--backend", "real"]
    if args[:1] == ["--backend"]:
        args = args[2:]
    count = int(args[0]) if args else 1000
    if real:
        main_real(count)
    else:
        main(count)
