"""The first and a no-op sync of queued dist jobs on the JobSet runtime, beside the same
jobs on the batch runtime, against the real control plane.

    python -m bench.bench_jobset [JOBS]        (default: 1000)

etcd and kube-apiserver of tests/controlplane (no controllers: thousands of pods would
only add noise), with the CRDs of JobSet v0.11 and Kueue v0.17 as their modules publish
them, and no manager running: what is measured is mxgitops' own traffic, a JobSet
stored as rendered (every defaulted field is written, so no webhook would add any).
Each runtime syncs JOBS dist jobs (1 scheduler, 2 servers, 4 workers) of its own
instance into a namespace of its own: on batch 7 batch Jobs and 1 Service per job,
on JobSet one JobSet per job (each names a queue, so each is created suspended, as
Kueue admits it). Requests are counted from the API server's audit log.

Then the API server's floor for the JobSet runtime's first sync: the same JobSets,
rendered beforehand into a namespace of their own, POSTed by 16 threads (each with
its own connection, as the sync's parallelism 16) and nothing else.

Prints figures, each ratio beside its target; not a test. Targets: the first sync
makes one create per job on JobSet (eight on batch); a no-op sync stays at O(1)
requests on both; the JobSet runtime's first sync within 1.15x of the floor.

Measured here (2 cores, 1,000 jobs, Events on): first sync, batch 9,013 requests in
46.1 s, JobSet 2,012 in 33.2 s (each with 1,000 Events, and the ledger created first
to record the runtimes in use); no-op, batch 4 requests (3.8 s: its ledger records
that it never ran a JobSet, so JobSets are not listed), JobSet 6 (3.7 s: JobSets, and
Kueue's Workloads because the JobSets are queued). Before the record (issue 20) a
batch no-op was 5 requests: JobSets were listed in every sync.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from bench.bench_sync import audited, manifest
from mxgitops.commands.sync import sync
from mxgitops.objects import KubeObject
from mxgitops.runtimes.registry import install_hash_shapes
from mxgitops.settings.config import SyncConfig

FLOOR_THREADS = 16
FLOOR_TARGET = 1.15  # the JobSet runtime's first sync, at most this many times the floor


def write_repo(root: Path, jobs: int, queued: bool) -> Path:
    root.mkdir(parents=True)
    for index in range(jobs):
        doc = manifest(index)
        if queued:
            doc["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "training"}}
        (root / f"job-{index:04d}.yaml").write_text(yaml.safe_dump(doc))
    return root


def rendered_jobsets(repo: Path, namespace: str) -> list[KubeObject]:
    """The JobSets the sync creates for `repo`, in `namespace`, under another instance."""
    from mxgitops.manifests import loading as manifests
    from mxgitops.runtimes import registry
    from mxgitops.runtimes.shared.podtemplate import RenderContext

    loaded = manifests.load([repo], default_namespace=namespace)
    context = RenderContext(instance="floor")
    objects = [o for job in loaded.jobs for o in registry.render(job, context)]
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
    return objects


def post_floor(plane: Any, objects: list[KubeObject]) -> float:
    """Seconds for `FLOOR_THREADS` threads, each with its own connection, to POST
    `objects` (JobSets) and do nothing else."""
    from tests.controlplane.rest import Rest

    assert plane.pki and plane.client
    pending = iter(objects)
    claim = threading.Lock()
    sessions = [
        Rest(plane.url, plane.pki.ca, plane.client.cert, plane.client.key)
        for _ in range(FLOOR_THREADS)
    ]

    def poster(rest: Rest) -> None:
        while True:
            with claim:
                obj = next(pending, None)
            if obj is None:
                return
            namespace = obj["metadata"]["namespace"]
            rest.create(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets", obj)

    threads = [threading.Thread(target=poster, args=(rest,)) for rest in sessions]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


def main(jobs: int = 1000) -> None:
    from tests.controlplane.harness import wait_for
    from tests.controlplane.launcher import ControlPlane
    from tests.controlplane.rest import Rest
    from tests.ecosystem.addons import crds, established
    from tests.ecosystem.build import JOBSET, KUEUE

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        print(f"{jobs} dist jobs (1 scheduler, 2 servers, 4 workers), real kube-apiserver")
        with ControlPlane(tmp / "plane", controllers=False) as plane:
            assert plane.pki and plane.admin and plane.audit_log
            admin = Rest(plane.url, plane.pki.ca, plane.admin.cert, plane.admin.key)
            definitions = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
            for crd in [*crds(JOBSET), *crds(KUEUE)]:
                admin.create(definitions, crd)
                path = f"{definitions}/{crd['metadata']['name']}"
                wait_for(
                    f"CRD {crd['metadata']['name']}",
                    lambda p=path: established(admin.get_or_none(p)),
                )
            kubeconfig = plane.kubeconfig(tmp / "kubeconfig")
            results: dict[str, list[tuple[int, float, Counter[str]]]] = {}
            for runtime in ("batch", "jobset"):
                namespace = f"bench-{runtime}"
                admin.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
                repo = write_repo(tmp / runtime, jobs, queued=runtime == "jobset")
                config = SyncConfig(
                    repo=str(repo),
                    kubeconfig=kubeconfig,
                    namespace=namespace,
                    instance=runtime,
                    parallelism=16,
                    cache_dir=tmp / f"cache-{runtime}",
                )
                for _ in ("first", "no-op"):
                    since = plane.audit_log.stat().st_size
                    start = time.perf_counter()
                    outcome = sync(config)
                    elapsed = time.perf_counter() - start
                    assert outcome.ok, [e for j in outcome.summary.jobs for e in j.errors][:3]
                    log = audited(plane.audit_log, since)
                    kinds = Counter(
                        f"{e['verb']} {(e.get('objectRef') or {}).get('resource', '')}" for e in log
                    )
                    results.setdefault(runtime, []).append((len(log), elapsed, kinds))
            for index, title in enumerate(("first sync (parallelism 16)", "no-op sync")):
                print(title)
                for runtime in ("batch", "jobset"):
                    requests, elapsed, kinds = results[runtime][index]
                    shown = ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items()))
                    print(f"  {runtime:>6}: {requests:>6} requests, {elapsed:6.2f} s  ({shown})")
                batch, jobset = results["batch"][index], results["jobset"][index]
                print(
                    f"  batch / jobset: {batch[0] / jobset[0]:.1f}x the requests, "
                    f"{batch[1] / jobset[1]:.1f}x the time"
                )
            admin.create("/api/v1/namespaces", {"metadata": {"name": "bench-floor"}})
            floor = post_floor(plane, rendered_jobsets(tmp / "jobset", "bench-floor"))
            ratio = results["jobset"][0][1] / floor
            verdict = "met" if ratio <= FLOOR_TARGET else "NOT met"
            print(
                f"the floor: {FLOOR_THREADS} threads POSTing the same {jobs} JobSets, nothing "
                f"else: {floor:.2f} s; the JobSet runtime's first sync is {ratio:.2f}x that "
                f"(target <= {FLOOR_TARGET}x: {verdict})"
            )


if __name__ == "__main__":
    install_hash_shapes()  # this script is an entry point: see the registry
    main(int(sys.argv[1]) if sys.argv[1:] else 1000)
