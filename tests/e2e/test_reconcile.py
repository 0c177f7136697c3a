"""End to end: `sync()` against the API double over HTTP, through the official client.

Every test writes manifests to a plain directory (read as-is, no Git), runs
`mxgitops.commands.sync.sync` against a fresh double, and asserts on what the double
stores and on its request log: which requests were made, and which writes.
The double's job controller and kubelet are stepped explicitly, so job states
follow the seed's rules without any waiting. Retries never sleep: the retry
policy's `sleep` records instead.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mxgitops.commands.sync import SyncOutcome
from mxgitops.errors import ClusterError, LeaseHeldError
from mxgitops.kube import calls, cluster, lease
from mxgitops.manifests import loading as manifests
from mxgitops.objects import (
    INSTANCE_LABEL,
    JOB_NAME_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
)
from mxgitops.runtimes.batch.render import render_job
from mxgitops.runtimes.shared.podtemplate import RenderContext
from mxgitops.settings.config import read_repo_settings
from tests.helpers import corpus
from tests.helpers.corpus import Corpus, Shape
from tests.helpers.sync import (
    EXAMPLE_REPO,
    INSTANCE,
    NS,
    RETRY,
    RID,
    WRITE_METHODS,
    Syncer,
    assert_no_op,
    batch_job,
    container,
    delete,
    finish,
    job_objects,
    lists,
    mxjob,
    read_shard,
    remove,
    repo,
    run,
    states,
    summary_of,
    sync_hooked,
    write,
    writes,
)
from tests.kubeapi.clients import raw
from tests.kubeapi.harness import KubeAPI
from tests.kubeapi.resources import resource

__all__ = ["repo", "run"]  # fixtures from tests/helpers, used here

FAILED = frozenset({0, 429, 500, 503})


# -- helpers ------------------------------------------------------------------


def names(api: KubeAPI, kind: str, namespace: str | None = NS) -> set[str]:
    return {o["metadata"]["name"] for o in api.objects(kind, namespace)}


def expected_objects(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """What a sync of `root` must create: every valid manifest's rendered objects."""
    path = read_repo_settings(root).values.get("path", ".")
    loaded = manifests.load([root / path], default_namespace=NS)
    ctx = RenderContext(instance=INSTANCE)
    return {
        (o["kind"], o["metadata"]["name"]): o for job in loaded.jobs for o in render_job(job, ctx)
    }


def assert_strictly_valid(objects: list[dict[str, Any]], api: KubeAPI) -> None:
    """What mxgitops sent passes the server's Strict validation (checked by a dry-run
    create in an empty namespace, as the names are taken in the real one)."""
    for obj in objects:
        body = copy.deepcopy(obj)
        body["metadata"]["namespace"] = "strict"
        api.create_strictly(body, "strict")


def env_of(job: dict[str, Any]) -> dict[str, str]:
    (mxnet,) = [c for c in job["spec"]["template"]["spec"]["containers"] if c["name"] == "mxnet"]
    return {e["name"]: e.get("value", "") for e in mxnet.get("env") or []}


# -- first sync, second sync ------------------------------------------------------


def example_or_own_repo(tmp_path: Path) -> Path:
    """jobs-repo-example/ if it has manifests yet; otherwise our own of both dialects."""
    if EXAMPLE_REPO.is_dir() and any(EXAMPLE_REPO.rglob("*.y*ml")):
        return EXAMPLE_REPO
    own = write(tmp_path / "own", mxjob("resnet", servers=2, workers=3), mxjob("mnist", servers=0))
    (own / "seed.yaml").write_text(corpus.OWN.path(Shape.SEED_DIST).read_text())
    return own


@pytest.mark.parametrize("examples", [pytest.param(None, id="jobs-repo-example"), *corpus.params()])
def test_first_sync_creates_exactly_the_rendered_objects_and_the_second_writes_nothing(
    kubeapi: KubeAPI, tmp_path: Path, examples: Corpus | None
) -> None:
    root = examples.root if examples else example_or_own_repo(tmp_path)
    run = Syncer(kubeapi, root, cache=tmp_path / "cache")
    expected = expected_objects(root)
    assert expected
    first = run()
    assert all(not j.errors for j in first.summary.jobs)
    stored = {("Job", n) for n in names(kubeapi, "jobs")} | {
        ("Service", n) for n in names(kubeapi, "services")
    }
    assert stored == set(expected)
    for kind, name in expected:
        obj = kubeapi.get(kind, name, NS)
        assert obj is not None
        assert obj["metadata"]["labels"] == expected[(kind, name)]["metadata"]["labels"]
    assert_strictly_valid(list(expected.values()), kubeapi)
    kubeapi.clear_log()
    second = run()
    assert_no_op(kubeapi)
    assert {j.action for j in second.summary.jobs} == {"unchanged"}


# The seed dist example's servers and workers (its one scheduler listens on PsRootPort 9091).
SEED_DIST_SERVERS_WORKERS = {"own": (2, 4), "external": (2, 3)}


@pytest.mark.parametrize("examples", corpus.params())
def test_the_examples_render_the_seed_objects(
    kubeapi: KubeAPI, tmp_path: Path, examples: Corpus
) -> None:
    outcome = Syncer(kubeapi, examples.root, cache=tmp_path / "cache")()
    # MXTune is refused, with a clear problem; the other four are created.
    assert not outcome.ok
    (problem,) = outcome.summary.problems
    tune = examples[Shape.TUNE_GPU].job
    assert tune in problem and "MXTune" in problem
    trained = [Shape.BYTEPS_DIST_GPU, Shape.SEED_DIST, Shape.SEED_LOCAL, Shape.KUBEFLOW_DIST_GPU]
    assert {j.name: j.action for j in outcome.summary.jobs} == {
        examples[shape].job: "create" for shape in trained
    }
    assert not [n for n in names(kubeapi, "jobs") if n.startswith(tune)]

    # The seed's dist job: 1 scheduler, its servers and workers, PsRootPort 9091.
    dist = examples[Shape.SEED_DIST].job
    servers, workers = SEED_DIST_SERVERS_WORKERS[examples.name]
    jobs = job_objects(kubeapi, dist)
    by_name = {j["metadata"]["name"]: j for j in jobs}
    (runtime_id,) = {j["metadata"]["labels"]["runtime_id"] for j in jobs}
    assert re.fullmatch(RID, runtime_id)
    prefix = f"{dist}-{{}}-{runtime_id}-{{}}"
    expected = [("scheduler", 0)] + [("server", i) for i in range(servers)]
    expected += [("worker", i) for i in range(workers)]
    assert set(by_name) == {prefix.format(r, i) for r, i in expected}
    service_name = prefix.format("scheduler", 0)
    for role, index in expected:
        job = by_name[prefix.format(role, index)]
        labels = {
            "mxnet.mlkube.io": "",
            "job_type": role.upper(),
            "runtime_id": runtime_id,
            "task_index": str(index),
            MANAGED_BY_LABEL: MANAGED_BY,
            INSTANCE_LABEL: INSTANCE,
            JOB_NAME_LABEL: dist,
        }
        assert job["metadata"]["labels"] == labels
        assert labels.items() <= job["spec"]["template"]["metadata"]["labels"].items()
        assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (1, 1)
        env = env_of(job)
        worker_id = {"DMLC_WORKER_ID": str(index)} if role == "worker" else {}
        scheduler_address = f"{service_name}.{service_name}"  # its hostname.subdomain
        assert {k: v for k, v in env.items() if k != "MX_CONFIG"} == {
            "DMLC_PS_ROOT_URI": scheduler_address,
            "DMLC_PS_ROOT_PORT": "9091",
            "DMLC_NUM_SERVER": str(servers),
            "DMLC_NUM_WORKER": str(workers),
            "DMLC_ROLE": role,
            "DMLC_USE_KUBERNETES": "1",
            **worker_id,
        }
        config = json.loads(env["MX_CONFIG"])
        assert config["task"] == {"type": role, "index": index}
        assert config["cluster"]["scheduler"] == [{"url": scheduler_address, "port": 9091}]
        assert len(config["cluster"]["server"]) == servers
        assert len(config["cluster"]["worker"]) == workers
    service = kubeapi.get("Service", service_name, NS)
    assert service is not None
    assert service["spec"]["ports"][0]["name"] == "ps-root-port"
    assert (service["spec"]["ports"][0]["port"], service["spec"]["ports"][0]["targetPort"]) == (
        9091,
        9091,
    )
    # The headless Service selects every pod of the job, each of which has its own
    # DNS name in it: hostname (its batch Job's name) and subdomain (the Service).
    assert service["spec"]["clusterIP"] == "None"
    kubeapi.run_job_controller(NS)
    selected = {
        p["spec"].get("hostname"): p["spec"].get("subdomain")
        for p in kubeapi.objects("pods", NS)
        if service["spec"]["selector"].items() <= p["metadata"]["labels"].items()
    }
    assert selected == {prefix.format(r, i): service_name for r, i in expected}

    # A local job gets one worker Job, the operator's environment of one, no Service.
    (local,) = job_objects(kubeapi, examples[Shape.SEED_LOCAL].job)
    assert (env_of(local)["DMLC_ROLE"], env_of(local)["DMLC_NUM_WORKER"]) == ("worker", "1")
    assert not job_objects(kubeapi, examples[Shape.SEED_LOCAL].job, "services")
    # The user's environment is kept: BytePS workers still see their GPU limit etc.
    assert len(job_objects(kubeapi, examples[Shape.BYTEPS_DIST_GPU].job)) == 5  # replicas in all
    assert len(job_objects(kubeapi, examples[Shape.KUBEFLOW_DIST_GPU].job, "services")) == 1


# -- the GitOps rules -----------------------------------------------------------------


def test_replicas_change_replaces_removal_prunes_and_a_deleted_job_is_repaired(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    write(repo, mxjob("a"), mxjob("b"), mxjob("c"))
    run()
    old_a = names(kubeapi, "jobs") & {o["metadata"]["name"] for o in job_objects(kubeapi, "a")}
    assert len(old_a) == 4

    write(repo, mxjob("a", workers=3))
    outcome = run()
    assert summary_of(outcome, "a").action == "replace"
    new_a = {o["metadata"]["name"] for o in job_objects(kubeapi, "a")}
    assert len(new_a) == 5 and not new_a & old_a
    assert not names(kubeapi, "jobs") & old_a
    assert len(job_objects(kubeapi, "a", "services")) == 1

    remove(repo, "b")
    outcome = run()
    assert summary_of(outcome, "b").action == "delete"
    assert not job_objects(kubeapi, "b") and not job_objects(kubeapi, "b", "services")

    gone = batch_job(kubeapi, "c", "worker", 1)
    delete(kubeapi, "jobs", gone)
    service = job_objects(kubeapi, "c", "services")[0]["metadata"]["name"]
    delete(kubeapi, "services", service)
    kubeapi.clear_log()
    outcome = run()
    assert summary_of(outcome, "c").action == "repair"
    assert gone in names(kubeapi, "jobs") and service in names(kubeapi, "services")
    created = [e for e in writes(kubeapi) if e["method"] == "POST" and e["resource"] != "leases"]
    assert len(created) == 2
    kubeapi.clear_log()
    run()
    assert_no_op(kubeapi)


def foreign(kind: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    if kind == "Service":
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]},
        }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {
            "template": {
                "metadata": {"labels": labels},
                "spec": {"restartPolicy": "Never", "containers": [container()]},
            }
        },
    }


def fingerprint(obj: dict[str, Any] | None) -> tuple[str, str]:
    """What a sync could change of an object. Not its resourceVersion: on a real
    cluster the job controller writes a foreign Job's status, and that is no sync's doing."""
    assert obj is not None
    meta = obj["metadata"]
    mine = {k: meta.get(k) for k in ("labels", "annotations", "ownerReferences", "finalizers")}
    return meta["uid"], json.dumps([mine, obj.get("spec")], sort_keys=True)


def test_foreign_objects_survive_every_sync(kubeapi: KubeAPI, repo: Path, run: Syncer) -> None:
    other = {MANAGED_BY_LABEL: MANAGED_BY, INSTANCE_LABEL: "other", JOB_NAME_LABEL: "a"}
    unlabelled = {"app": "hand-made", JOB_NAME_LABEL: "a"}
    write(repo, mxjob("a"))
    taken = expected_objects(repo)
    scheduler = next(n for k, n in taken if k == "Job" and "-scheduler-" in n)
    worker = next(n for k, n in taken if k == "Job" and "-worker-" in n and n.endswith("-1"))
    aliens = {
        ("Job", "hand-made"): kubeapi.create(foreign("Job", "hand-made", unlabelled), NS),
        ("Job", "other-instance"): kubeapi.create(foreign("Job", "other-instance", other), NS),
        ("Service", "other-svc"): kubeapi.create(foreign("Service", "other-svc", other), NS),
        # Same names as two of ours: a create must never take them over.
        ("Job", worker): kubeapi.create(foreign("Job", worker, other), NS),
        ("Service", scheduler): kubeapi.create(foreign("Service", scheduler, unlabelled), NS),
    }
    before = {key: fingerprint(obj) for key, obj in aliens.items()}

    def untouched() -> None:
        for (kind, name), print_ in before.items():
            assert fingerprint(kubeapi.get(kind, name, NS)) == print_, name

    outcome = run()
    untouched()
    assert not outcome.ok
    errors = summary_of(outcome, "a").errors
    # The Service's name is taken: no batch Job starts (its workers would dial it). One
    # line says both.
    (error,) = errors
    assert scheduler in error and "not managed by this mxgitops instance" in error
    assert error.endswith("; not started: its batch Jobs need this first")
    assert not [
        o
        for o in kubeapi.objects("jobs", NS)
        if o["metadata"]["labels"].get(INSTANCE_LABEL) == INSTANCE
    ]

    run()  # tries to repair, fails the same way, touches nothing
    untouched()
    write(repo, mxjob("a", workers=3))  # replace
    run()
    untouched()
    remove(repo, "a")  # prune (the only job: needs force)
    outcome = run(force_prune=True)
    untouched()
    assert summary_of(outcome, "a").action == "delete"
    assert not [
        o
        for o in kubeapi.objects("jobs", NS)
        if o["metadata"]["labels"].get(INSTANCE_LABEL) == INSTANCE
    ]
    outcome = run(force_prune=True)
    untouched()
    assert outcome.summary.jobs == ()


# -- job and replica states ------------------------------------------------------------


def test_states_follow_the_seed_rules_as_pods_run_finish_and_fail(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    local = ["retry-137", "retry-nomsg", "oom", "exit1-msg", "exit137-msg", "done"]
    write(
        repo,
        *(mxjob(n, servers=0) for n in local),  # OnFailure: restarted in place
        mxjob("dist"),
        mxjob("dist-fail", restart="Never"),
    )
    run()
    kubeapi.run_job_controller(NS)
    outcome = run()
    assert states(outcome, "dist") == (
        "Pending",
        {"SCHEDULER": "Pending", "SERVER": "Pending", "WORKER": "Pending"},
    )
    for name in [*local, "dist", "dist-fail"]:
        for obj in job_objects(kubeapi, name):
            kubeapi.kubelet(job=obj["metadata"]["name"], namespace=NS, phase="Running")
    outcome = run()
    assert {j.state for j in outcome.summary.jobs} == {"Running"}
    assert states(outcome, "dist")[1] == {
        "SCHEDULER": "Running",
        "SERVER": "Running",
        "WORKER": "Running",
    }

    def fail(job: str, role: str = "worker", index: int = 0, **how: Any) -> None:
        kubeapi.kubelet(
            job=batch_job(kubeapi, job, role, index), namespace=NS, phase="Failed", **how
        )

    # Under OnFailure the kubelet restarts each in place, whatever the termination (the
    # job's backoffLimit, none here, counts restarts: tests/e2e/test_failure_semantics.py).
    fail("retry-137", exit_code=137)
    fail("retry-nomsg", exit_code=1)
    fail("oom", exit_code=137, reason="OOMKilled")
    fail("exit1-msg", exit_code=1, message="loss is NaN")
    fail("exit137-msg", exit_code=137, message="killed")
    kubeapi.kubelet(job=batch_job(kubeapi, "done", "worker"), namespace=NS, phase="Succeeded")
    kubeapi.kubelet(job=batch_job(kubeapi, "dist", "scheduler"), namespace=NS, phase="Succeeded")
    fail("dist-fail", "server", exit_code=2, message="bad gradient")  # Never: final
    kubeapi.run_job_controller(NS)
    outcome = run()
    assert {n: states(outcome, n)[0] for n in local} == {
        "retry-137": "Running",
        "retry-nomsg": "Running",
        "oom": "Running",
        "exit1-msg": "Running",
        "exit137-msg": "Running",
        "done": "Succeeded",
    }
    assert states(outcome, "oom")[1] == {"WORKER": "Running"}
    assert states(outcome, "retry-137")[1] == {"WORKER": "Running"}
    assert states(outcome, "done")[1] == {"WORKER": "Succeeded"}
    # dist: the scheduler decides, though servers and workers still run.
    assert states(outcome, "dist") == (
        "Succeeded",
        {"SCHEDULER": "Succeeded", "SERVER": "Running", "WORKER": "Running"},
    )
    assert states(outcome, "dist-fail") == (
        "Failed",
        {"SCHEDULER": "Running", "SERVER": "Failed", "WORKER": "Running"},
    )
    worker = next(r for r in summary_of(outcome, "dist").replicas if r.type == "WORKER")
    assert (worker.replicas, dict(worker.states)) == (2, {"Running": 2})
    # The finished ones are in the ledger now.
    book = read_shard(kubeapi.get("ConfigMap", f"mxgitops-ledger-{INSTANCE}", NS))
    assert {(k[1], f.state) for k, f in book.entries.items()} == {
        ("done", "Succeeded"),
        ("dist", "Succeeded"),
        ("dist-fail", "Failed"),
    }


def test_exit_code_policy_fails_the_batch_job(kubeapi: KubeAPI, repo: Path, run: Syncer) -> None:
    write(repo, mxjob("strict", servers=0, restart="ExitCode"))
    run()
    kubeapi.run_job_controller(NS)
    name = batch_job(kubeapi, "strict", "worker")
    kubeapi.kubelet(job=name, namespace=NS, phase="Failed", exit_code=3)
    job = kubeapi.get("Job", name, NS)
    assert job is not None
    assert any(c["type"] == "Failed" for c in job["status"]["conditions"])
    assert states(run(), "strict") == ("Failed", {"WORKER": "Failed"})


def test_a_finished_job_is_not_rerun_after_ttl_but_is_after_a_spec_change(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    write(repo, mxjob("once"), mxjob("other", servers=0))
    run()
    finish(kubeapi, "once")
    outcome = run()
    assert states(outcome, "once")[0] == "Succeeded"
    book = read_shard(kubeapi.get("ConfigMap", f"mxgitops-ledger-{INSTANCE}", NS))
    (entry,) = book.entries.values()
    assert (entry.name, entry.state, entry.spec_hash) == (
        "once",
        "Succeeded",
        summary_of(outcome, "once").spec_hash,
    )
    # The TTL controller deletes the finished job's objects.
    for kind in ("jobs", "services"):
        for obj in job_objects(kubeapi, "once", kind):
            delete(kubeapi, kind, obj["metadata"]["name"])
    kubeapi.settle(NS)  # the garbage collector removes their pods
    assert not [p for p in kubeapi.objects("pods", NS) if p["metadata"]["name"].startswith("once-")]
    kubeapi.clear_log()
    outcome = run()
    assert_no_op(kubeapi)
    assert (summary_of(outcome, "once").action, summary_of(outcome, "once").state) == (
        "unchanged",
        "Succeeded",
    )
    assert not job_objects(kubeapi, "once")

    write(repo, mxjob("once", args=["train.py", "--epochs=20"]))
    outcome = run()
    assert summary_of(outcome, "once").action == "create"
    assert len(job_objects(kubeapi, "once")) == 4


def test_on_change_wait_holds_a_replace_until_the_job_finished(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    wait = {"mxgitops.io/on-change": "wait"}
    write(repo, mxjob("patient", annotations=wait), mxjob("eager"))
    run()
    kubeapi.run_job_controller(NS)
    before = {o["metadata"]["name"] for o in job_objects(kubeapi, "patient")}
    write(repo, mxjob("patient", workers=3, annotations=wait), mxjob("eager", workers=3))
    kubeapi.clear_log()
    outcome = run()
    assert summary_of(outcome, "patient").action == "hold"
    assert "wait" in summary_of(outcome, "patient").reason
    assert summary_of(outcome, "eager").action == "replace"
    assert {o["metadata"]["name"] for o in job_objects(kubeapi, "patient")} == before
    assert not [e for e in writes(kubeapi) if "patient" in e["path"]]

    kubeapi.kubelet(job=batch_job(kubeapi, "patient", "scheduler"), namespace=NS, phase="Succeeded")
    outcome = run()
    assert summary_of(outcome, "patient").action == "replace"
    after = {o["metadata"]["name"] for o in job_objects(kubeapi, "patient")}
    assert len(after) == 5 and not after & before


def test_clean_pod_policy(kubeapi: KubeAPI, repo: Path, run: Syncer) -> None:
    write(
        repo,
        mxjob("clean-all", cleanPodPolicy="All"),
        mxjob("clean-running", runPolicy={"cleanPodPolicy": "Running"}),
        mxjob("clean-none", cleanPodPolicy="None"),
    )
    run()
    for name in ("clean-all", "clean-running", "clean-none"):
        finish(kubeapi, name)
    outcome = run()
    assert {j.name: j.action for j in outcome.summary.jobs} == {
        "clean-all": "clean",
        "clean-running": "clean",
        "clean-none": "stop",  # what still ran is stopped: a finished job holds nothing
    }
    assert not job_objects(kubeapi, "clean-all") and not job_objects(
        kubeapi, "clean-all", "services"
    )
    kept = job_objects(kubeapi, "clean-running")
    assert [o["metadata"]["labels"]["job_type"] for o in kept] == ["SCHEDULER"]
    assert len(job_objects(kubeapi, "clean-running", "services")) == 1
    (kept_none,) = job_objects(kubeapi, "clean-none")  # its finished scheduler, pods kept
    assert kept_none["metadata"]["labels"]["job_type"] == "SCHEDULER"
    kubeapi.settle()  # the real garbage collector takes a deleted Job's pods after the answer
    pods = {p["metadata"]["labels"][JOB_NAME_LABEL] for p in kubeapi.objects("pods", NS)}
    assert "clean-all" not in pods
    # Cleaned jobs stay finished: nothing is repaired or re-run.
    kubeapi.clear_log()
    outcome = run()
    assert_no_op(kubeapi)
    assert {j.state for j in outcome.summary.jobs} == {"Succeeded"}


# -- prune safety ---------------------------------------------------------------------


def live_jobs(api: KubeAPI) -> set[str]:
    return {o["metadata"]["labels"][JOB_NAME_LABEL] for o in api.objects("jobs", NS)}


def test_zero_valid_manifests_prune_nothing_unless_forced(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    write(repo, mxjob("a"), mxjob("b"))
    run()
    remove(repo, "a")
    remove(repo, "b")
    (repo / "notes.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    kubeapi.clear_log()
    outcome = run()
    assert outcome.summary.prune_refused and "no valid manifest" in outcome.summary.prune_refused
    assert {j.action for j in outcome.summary.jobs} == {"hold"}
    assert live_jobs(kubeapi) == {"a", "b"}
    assert not writes(kubeapi)
    outcome = run(force_prune=True)
    assert {j.action for j in outcome.summary.jobs} == {"delete"}
    assert live_jobs(kubeapi) == set()


def test_pruning_more_than_the_allowed_share_is_refused(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    write(repo, mxjob("a"), mxjob("b"), mxjob("c"))
    run()
    remove(repo, "a")
    remove(repo, "b")
    outcome = run()
    assert outcome.summary.prune_refused and "67%" in outcome.summary.prune_refused
    assert live_jobs(kubeapi) == {"a", "b", "c"}
    outcome = run(max_prune_share=0.7)
    assert live_jobs(kubeapi) == {"c"}


def test_an_invalid_manifest_protects_its_live_job_and_prune_off_prunes_nothing(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    write(repo, mxjob("a"), mxjob("b"), mxjob("c"), mxjob("d"))
    run()
    before = {o["metadata"]["name"]: fingerprint(o) for o in kubeapi.objects("jobs", NS)}
    broken = mxjob("a", workers=3)
    broken["spec"]["mxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "DMLC_ROLE", "value": "server"}
    ]
    write(repo, broken)
    remove(repo, "b")
    outcome = run(prune=False)
    assert not outcome.ok and any("DMLC_ROLE" in p for p in outcome.summary.problems)
    assert summary_of(outcome, "a").action == "hold"
    assert "invalid" in summary_of(outcome, "a").reason
    assert summary_of(outcome, "b").action == "hold"
    assert "pruning is off" in summary_of(outcome, "b").reason
    assert {o["metadata"]["name"]: fingerprint(o) for o in kubeapi.objects("jobs", NS)} == before
    outcome = run()
    assert summary_of(outcome, "a").action == "hold"
    assert summary_of(outcome, "b").action == "delete"
    assert live_jobs(kubeapi) == {"a", "c", "d"}


# -- the lease --------------------------------------------------------------------------


def lease_object(holder: str, renewed: datetime, duration: int = 600) -> dict[str, Any]:
    stamp = renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": f"mxgitops-{INSTANCE}", "namespace": NS},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": stamp,
            "renewTime": stamp,
        },
    }


def test_a_held_lease_stops_a_sync_before_any_write(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    write(repo, mxjob("a"))
    run()
    delete(kubeapi, "leases", f"mxgitops-{INSTANCE}")  # released by that sync
    kubeapi.create(lease_object("cron-abc/7", datetime.now(UTC)), NS)
    kubeapi.clear_log()
    run()  # nothing to change: no lease needed
    assert_no_op(kubeapi)
    write(repo, mxjob("a", workers=3))
    with pytest.raises(LeaseHeldError, match="cron-abc/7") as caught:
        run()
    assert caught.value.holder.startswith("cron-abc/7")
    assert not writes(kubeapi)


def test_an_expired_lease_is_taken_over(kubeapi: KubeAPI, repo: Path, run: Syncer) -> None:
    write(repo, mxjob("a"))
    kubeapi.create(lease_object("dead/1", datetime.now(UTC) - timedelta(hours=1), duration=60), NS)
    outcome = run()
    assert summary_of(outcome, "a").action == "create" and outcome.ok
    taken = kubeapi.get("Lease", f"mxgitops-{INSTANCE}", NS)
    assert taken is not None
    assert taken["spec"].get("holderIdentity") is None  # released after the sync
    assert taken["spec"]["leaseTransitions"] == 1


def uids(api: KubeAPI, job: str) -> set[str]:
    return {o["metadata"]["uid"] for o in job_objects(api, job)}


def test_a_sync_that_wrote_after_this_ones_read_makes_it_read_and_plan_again(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    """Another sync replaces `a` between this sync's read and its Lease: this sync
    must see the new objects, not replace them again (which would restart the job)."""
    write(repo, mxjob("a", workers=2))
    run()
    write(repo, mxjob("a", workers=3))
    replaced: set[str] = set()

    def another_sync() -> None:
        assert summary_of(run(), "a").action == "replace"
        replaced.update(uids(kubeapi, "a"))
        kubeapi.clear_log()

    outcome = sync_hooked(run, another_sync)
    assert outcome.ok and summary_of(outcome, "a").action == "unchanged"
    assert uids(kubeapi, "a") == replaced  # not replaced a second time
    assert lists(kubeapi.request_log, "jobs") == 1  # read again, under the Lease


def test_a_change_reads_only_the_ledger_again_under_a_lease_handed_over_cleanly(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    write(repo, mxjob("a"), mxjob("b"), mxjob("c"))
    run()
    write(repo, mxjob("a"), mxjob("b", workers=3), mxjob("c"))
    kubeapi.clear_log()
    outcome = run()
    assert outcome.ok and summary_of(outcome, "b").action == "replace"
    log = kubeapi.request_log
    assert [lists(log, p) for p in ("jobs", "services", "pods", "configmaps")] == [1, 1, 1, 2]
    record = kubeapi.get("ConfigMap", f"mxgitops-writes-{INSTANCE}", NS)
    assert record is not None and record["data"]["holder"] == lease.default_holder()
    assert not kubeapi.get("Lease", f"mxgitops-{INSTANCE}", NS)["metadata"].get("annotations")


def test_a_lease_released_with_writes_unrecorded_makes_the_next_holder_read_again(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    """A holder stopped in its apply releases the Lease saying so; the next one reads
    the cluster again under the Lease, then takes the mark off."""
    write(repo, mxjob("a"))
    run()
    api = kubeapi_cluster(kubeapi)
    taken = lease.take(api, instance=INSTANCE, namespace=NS, holder="x/1").lease
    lease.release(api, taken, unrecorded=True)
    released = kubeapi.get("Lease", f"mxgitops-{INSTANCE}", NS)
    assert released["metadata"]["annotations"] == {lease.UNRECORDED: "true"}
    write(repo, mxjob("a", workers=3))
    kubeapi.clear_log()
    assert summary_of(run(), "a").action == "replace"
    assert lists(kubeapi.request_log, "jobs") == 2
    assert not kubeapi.get("Lease", f"mxgitops-{INSTANCE}", NS)["metadata"].get("annotations")


def kubeapi_cluster(api: KubeAPI) -> cluster.Cluster:
    return cluster.connect(kubeconfig=api.kubeconfig, retry=RETRY)


def test_a_hand_edit_between_the_read_and_the_lease_is_repaired_by_the_next_sync(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    """Only syncs' writes are looked for under the Lease (they are what a stale plan
    could undo); a hand edit at that moment is like one during the apply: the next
    sync sees and repairs it."""
    write(repo, mxjob("a"))
    run()
    gone = batch_job(kubeapi, "a", "worker", 1)
    write(repo, mxjob("a"), mxjob("b"))
    outcome = sync_hooked(run, lambda: delete(kubeapi, "jobs", gone))
    assert outcome.ok
    assert (summary_of(outcome, "a").action, summary_of(outcome, "b").action) == (
        "unchanged",
        "create",
    )
    assert summary_of(run(), "a").action == "repair"
    assert gone in names(kubeapi, "jobs")


# -- faults ------------------------------------------------------------------------------


def failed_writes(log: list[dict[str, Any]], attempts: int) -> list[dict[str, Any]]:
    """The last attempt of each write whose every attempt failed, from a sequential
    (parallelism 1) request log."""
    entries = [e for e in log if e["method"] in WRITE_METHODS]
    failed, i = [], 0
    while i < len(entries):
        tries = 1
        while entries[i]["status"] in FAILED and tries < attempts:
            i, tries = i + 1, tries + 1
            assert entries[i]["method"] == entries[i - 1]["method"]
        if entries[i]["status"] in FAILED:
            failed.append(entries[i])
        i += 1
    return failed


def _handoff(path: str) -> bool:
    return path.endswith(f"/configmaps/mxgitops-writes-{INSTANCE}")


def expire_lease(api: KubeAPI) -> None:
    """Let the lease's duration pass: no clock of ours moves, so its renewal goes back in
    time (on the real server as admin, past the fault proxy; in the double's store)."""
    stale = "2000-01-01T00:00:00.000000Z"
    if api.backend == "real":
        path = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/mxgitops-{INSTANCE}"
        status, _, body = raw(
            api, "PATCH", path, {"spec": {"renewTime": stale}}, "application/merge-patch+json"
        )
        assert status == 200, body
        return
    leases = resource("leases")
    with api.server.store.lock:
        held = copy.deepcopy(api.server.store.get(leases, NS, f"mxgitops-{INSTANCE}"))
        held["spec"]["renewTime"] = stale
        api.server.store.put(leases, held)


FAULTS = "write:500=0.055,write:503=0.055,write:429=0.055,write:drop=0.055"


def converge(
    api: KubeAPI,
    run: Syncer,
    check: Callable[[SyncOutcome | None, int], None],
    seen_faults: Counter[str],
) -> Iterator[int]:
    for attempt in range(12):
        api.clear_log()
        try:
            outcome: SyncOutcome | None = run()
        except LeaseHeldError as exc:
            # Only our own lease, which the last sync failed to release: it expires.
            assert seen_faults["release failed"] and exc.holder.startswith(lease.default_holder())
            assert not writes(api)
            expire_lease(api)
            outcome = None
        except ClusterError:  # the lease could not be taken: nothing else was written
            assert {e["resource"] for e in writes(api)} == {"leases"}
            outcome = None
        seen_faults.update(e["fault"] for e in api.request_log if e["fault"])
        failed = failed_writes(api.request_log, run.retry.attempts)
        # Releasing the lease is best effort: a sync whose release failed still did its job.
        release_failed = outcome is not None and any(e["resource"] == "leases" for e in failed)
        seen_faults["release failed"] = int(release_failed)
        # So is recording that it wrote (the hand-off record): the next sync reads again.
        reported = [e for e in failed if e["resource"] != "leases" and not _handoff(e["path"])]
        check(outcome, len(reported))
        if outcome is not None and outcome.ok:
            yield attempt
            return
    raise AssertionError("no convergence in 12 syncs")


# Each seed is another sequence of faults. Through the real control plane's fault proxy
# a sequence costs seconds, through the double milliseconds: the real one judges three,
# the double five more.
REAL_SEEDS, MORE_SEEDS = range(3), range(3, 8)


@pytest.mark.parametrize("seed", REAL_SEEDS)
def test_syncs_converge_through_failing_writes(kubeapi: KubeAPI, repo: Path, seed: int) -> None:
    converges_through_failing_writes(kubeapi, repo, seed)


@pytest.mark.double_only("five more fault sequences, at the double's cost (REAL_SEEDS)")
@pytest.mark.parametrize("seed", MORE_SEEDS)
def test_syncs_converge_through_more_failing_writes(
    kubeapi: KubeAPI, repo: Path, seed: int
) -> None:
    converges_through_failing_writes(kubeapi, repo, seed)


def converges_through_failing_writes(kubeapi: KubeAPI, repo: Path, seed: int) -> None:
    run = Syncer(
        kubeapi,
        repo,
        retry=calls.RetryPolicy(attempts=2, base_delay=0.01, max_delay=5),
        parallelism=1,
    )
    aliens = [
        kubeapi.create(foreign("Job", "hand-made", {"app": "x"}), NS),
        kubeapi.create(
            foreign("Job", "other", {MANAGED_BY_LABEL: MANAGED_BY, INSTANCE_LABEL: "other"}), NS
        ),
    ]
    prints = [fingerprint(a) for a in aliens]
    write(repo, *(mxjob(f"job{i}", servers=1 + i % 2, workers=2) for i in range(10)))
    kubeapi.faults(FAULTS, seed=seed, retry_after=1)
    stats = {"failed": 0, "reported": 0, "syncs": 0}
    seen_faults: Counter[str] = Counter()

    def check(outcome: SyncOutcome | None, failed: int) -> None:
        stats["syncs"] += 1
        stats["failed"] += failed
        if failed:
            stats["reported"] += 1
            assert outcome is None or not outcome.ok
            if outcome is not None:
                errors = [e for j in outcome.summary.jobs for e in j.errors]
                assert errors or (outcome.changeset and outcome.changeset.ledger_error)
        if outcome is not None and outcome.ok:
            assert failed == 0

    def assert_exactly(root: Path) -> None:
        expected = expected_objects(root)
        ours = [
            (o["kind"], o["metadata"]["name"])
            for kind in ("jobs", "services")
            for o in kubeapi.objects(kind)
            if o["metadata"]["labels"].get(INSTANCE_LABEL) == INSTANCE
        ]
        assert sorted(ours) == sorted(expected)
        assert [
            fingerprint(kubeapi.get("Job", a["metadata"]["name"], NS)) for a in aliens
        ] == prints

    list(converge(kubeapi, run, check, seen_faults))
    assert_exactly(repo)
    write(repo, mxjob("job0", servers=2, workers=3), mxjob("job6"))
    remove(repo, "job1")
    list(converge(kubeapi, run, check, seen_faults))
    assert_exactly(repo)
    assert {"500", "503", "429", "drop"} <= set(seen_faults), seen_faults
    assert stats["failed"] > 0 and stats["reported"] > 0
    # Retry-After is honoured: each retried 429 slept exactly the header's value.
    assert 1.0 in run.sleeps
    assert all(s in (1.0, 0.01) for s in run.sleeps)


@pytest.mark.parametrize(("retry_after", "max_delay", "slept"), [(2, 5.0, 2.0), (30, 5.0, 5.0)])
def test_retry_after_is_honoured_and_capped(
    kubeapi: KubeAPI, repo: Path, retry_after: int, max_delay: float, slept: float
) -> None:
    run = Syncer(
        kubeapi, repo, retry=calls.RetryPolicy(attempts=3, base_delay=0.01, max_delay=max_delay)
    )
    write(repo, mxjob("a", servers=0))
    kubeapi.faults("create/jobs:429=1", retry_after=retry_after)
    outcome = run()
    assert run.sleeps == [slept, slept]
    assert not outcome.ok
    (error,) = summary_of(outcome, "a").errors
    assert "Too many requests" in error
    kubeapi.faults("")
    assert run().ok and len(job_objects(kubeapi, "a")) == 1


def test_a_failed_ledger_write_fails_the_sync_and_is_retried(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    write(repo, mxjob("a", servers=0))
    run()
    finish(kubeapi, "a", "worker")
    kubeapi.faults("write/configmaps:500=1")
    outcome = run()
    assert outcome.changeset is not None and outcome.changeset.ledger_error
    assert "recording finished jobs failed" in outcome.changeset.ledger_error
    assert not outcome.ok
    kubeapi.faults("")
    assert run().ok
    book = read_shard(kubeapi.get("ConfigMap", f"mxgitops-ledger-{INSTANCE}", NS))
    assert [f.name for f in book.entries.values()] == ["a"]


def test_a_failed_lease_release_does_not_lose_the_outcome(
    kubeapi: KubeAPI, repo: Path, run: Syncer
) -> None:
    write(repo, mxjob("a", servers=0))
    kubeapi.faults("update/leases:503=1")
    outcome = run()  # the lease is taken by a create; only its release (an update) fails
    assert outcome.ok and summary_of(outcome, "a").action == "create"
    held = kubeapi.get("Lease", f"mxgitops-{INSTANCE}", NS)
    assert held is not None and held["spec"]["holderIdentity"]  # it expires on its own
