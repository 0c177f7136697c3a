"""The services around a sync down, on the real parts (issue 30): the forge (a real
Gitea, where the jobs repository lives), the Pushgateway, Kueue's controller manager.

Each is stopped by its pid at a chosen point of a real sync (the sync's own step
wrapped, so the point is the same every run) or of a job's life, and started again as
it was. Asserted: the sync's exit code says what failed, what was applied stands, and
the next sync after the service is back delivers what was missed, once, with the
state as it is then; a queued or preempted gang under Kueue is never failed, never
recorded finished, never duplicated, and runs once readmitted.

The Gitea and Pushgateway cases use the session's real control plane (its fake
kubelet moves the pods); the Kueue cases the shared JobSet+Kueue cluster, whose Kueue
each test starts again (its webhooks answering) before it ends, whatever happened.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from mxgitops.cli import main
from mxgitops.commands.sync import SyncOutcome
from mxgitops.outputs import report
from mxgitops.source import repository as source
from tests.controlplane.harness import RealCluster, wait_for
from tests.ecosystem.fixtures import Ecosystem
from tests.gitea.server import ADMIN, Gitea
from tests.gitrepos.fixtures import GitRemote, run_git
from tests.helpers.jobset import (
    condition,
    gpu_job,
    kueue_setup,
    only_jobset,
    pod_of,
    step,
    until,
)
from tests.helpers.sync import NS, Syncer, batch_job, mxjob, summary_of
from tests.pushgateway.server import Pushgateway

INSTANCE = "faults"
CONTEXT = f"mxgitops/{INSTANCE}"


class Clock:
    """When the fault struck and when the service was back: the recovery's figures."""

    def __init__(self) -> None:
        self.fault = self.back = 0.0

    def struck(self, fault: Callable[[], None]) -> Callable[[], None]:
        def timed() -> None:
            fault()
            self.fault = time.monotonic()

        return timed

    def restarted(self, start: Callable[[], None]) -> None:
        start()
        self.back = time.monotonic()

    def converged(self, what: str) -> None:
        now = time.monotonic()
        print(
            f"\n{what}: converged {now - self.fault:.1f} s after the fault, "
            f"{now - self.back:.1f} s after the service was back"
        )


def noted(note: str | None) -> dict[str, str]:
    """The jobs of a status note and their states."""
    assert note is not None, "no note"
    summary, why = report.read_note(note)
    assert summary is not None, why
    return {job.name: job.state for job in summary.jobs}


def sync_cli(*args: str, env: dict[str, str] | None = None) -> Result:
    """`mxgitops sync` as the CronJob runs it; its exit code and output."""
    return CliRunner().invoke(main, ["sync", "--instance", INSTANCE, "-n", NS, *args], env=env)


@pytest.fixture
def cluster(control_plane: RealCluster) -> RealCluster:
    control_plane.wipe()
    control_plane.clear_log()
    return control_plane


@pytest.fixture
def at_the_note_push(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """`fault` run once, in the next sync's own step that pushes the note, before the
    push or after it: the same point of every run."""

    def arrange(fault: Callable[[], None], *, before: bool) -> None:
        push = source.Repository.push_notes

        def pushed(self: source.Repository, **options: Any) -> None:
            monkeypatch.setattr(source.Repository, "push_notes", push)
            if before:
                fault()
            push(self, **options)
            if not before:
                fault()

        monkeypatch.setattr(source.Repository, "push_notes", pushed)

    return arrange


# -- the forge down: Gitea killed during the note push, stopped during the status post --


class Forge:
    """A jobs repository on the Gitea, a work clone that pushes to it, and syncs of it
    by the CLI against the real control plane, posting commit statuses to the Gitea."""

    def __init__(self, gitea: Gitea, name: str, tmp_path: Path, cluster: RealCluster) -> None:
        self.gitea, self.name, self.cluster = gitea, name, cluster
        self.url = gitea.create_repository(name).replace("://", f"://{ADMIN}@")
        self.token = gitea.token(f"sync-{name}", ["write:repository"])
        self.work, self.cache = tmp_path / "work", tmp_path / "cache"
        self.work.mkdir()
        run_git("init", "-q", "-b", "main", str(self.work), cwd=tmp_path)
        push_url = self.url.replace(f"{ADMIN}@", f"{ADMIN}:{self.token}@")
        run_git("remote", "add", "origin", push_url, cwd=self.work)

    def commit(self, doc: dict[str, Any]) -> str:
        (self.work / f"{doc['metadata']['name']}.yaml").write_text(yaml.safe_dump(doc))
        run_git("add", "-A", cwd=self.work)
        run_git("commit", "-q", "-m", "submit", cwd=self.work)
        run_git("push", "-q", "origin", "main", cwd=self.work)
        return run_git("rev-parse", "HEAD", cwd=self.work)

    def sync(self) -> Result:
        self.cluster.settle()
        env = {"MXGITOPS_GIT_TOKEN": self.token, "MXGITOPS_STATUS_TOKEN": self.token}
        args = ["--repo", self.url, "--kubeconfig", str(self.cluster.kubeconfig)]
        # The forge's own retries (2 s, then 4 s more) bounded by --status-timeout: a
        # forge down costs a sync this long (60 s by default), the rest given up.
        forge = ["--cache-dir", str(self.cache), "--status-provider", "gitea"]
        forge += ["--status-timeout", "5"]
        return sync_cli(*args, *forge, env=env)

    def notes(self) -> str:
        """The notes ref on the Gitea (its commit), fetched into the work clone."""
        run_git("fetch", "-q", "origin", "+refs/notes/mxgitops:refs/notes/mxgitops", cwd=self.work)
        return run_git("rev-parse", "refs/notes/mxgitops", cwd=self.work)

    def note(self, commit: str) -> dict[str, str]:
        self.notes()
        return noted(run_git("notes", "--ref=mxgitops", "show", commit, cwd=self.work))

    def statuses(self, commit: str) -> list[tuple[str, str]]:
        """Every status mxgitops posted on `commit`, as Gitea keeps them (none replaced)."""
        posted = self.gitea.statuses(self.name, commit, self.token)
        return [(s["status"], s["description"]) for s in posted if s["context"] == CONTEXT]


@pytest.fixture
def forge(
    gitea: Gitea, cluster: RealCluster, tmp_path: Path, git_isolation: None
) -> Iterator[Forge]:
    name = f"faults-{tmp_path.name}"[-60:].replace("_", "-")
    yield Forge(gitea, name, tmp_path, cluster)
    if gitea.process is not None and gitea.process.poll() is not None:
        gitea.start_again()  # the other tests of the group share it


@pytest.mark.timeout(120)
def test_gitea_killed_at_the_note_push_the_next_sync_writes_note_and_status_once(
    forge: Forge, gitea: Gitea, cluster: RealCluster, at_the_note_push: Callable[..., None]
) -> None:
    commit, clock = forge.commit(mxjob("train", servers=0)), Clock()
    at_the_note_push(clock.struck(lambda: gitea.kill(signal.SIGKILL)), before=True)
    faulted = forge.sync()
    assert faulted.exit_code == 3, faulted.output  # a sync that applied, not delivered
    assert "the status note was not pushed" in faulted.output, faulted.output
    assert "1 of 1 commit statuses not posted" in faulted.output, faulted.output
    worker = batch_job(cluster, "train", "worker")  # the apply stands
    clock.restarted(gitea.start_again)
    assert forge.statuses(commit) == []
    cluster.kubelet(job=worker, namespace=NS, phase="Running")  # the truth moved on
    again = forge.sync()
    assert again.exit_code == 0, again.output
    assert forge.note(commit) == {"train": "Running"}
    assert forge.statuses(commit) == [("pending", "1 running")]
    clock.converged("Gitea SIGKILLed at the note push")
    notes = forge.notes()
    assert forge.sync().exit_code == 0  # nothing twice
    assert forge.notes() == notes
    assert forge.statuses(commit) == [("pending", "1 running")]


@pytest.mark.timeout(120)
def test_gitea_stopped_after_the_note_push_the_next_sync_posts_the_status_once(
    forge: Forge, gitea: Gitea, cluster: RealCluster, at_the_note_push: Callable[..., None]
) -> None:
    commit, clock = forge.commit(mxjob("train", servers=0)), Clock()
    at_the_note_push(clock.struck(lambda: gitea.kill(signal.SIGTERM)), before=False)
    faulted = forge.sync()
    assert faulted.exit_code == 3, faulted.output
    assert "1 of 1 commit statuses not posted" in faulted.output, faulted.output
    assert "note was not pushed" not in faulted.output, faulted.output
    batch_job(cluster, "train", "worker")
    clock.restarted(gitea.start_again)
    assert forge.note(commit) == {"train": "Pending"}
    notes = forge.notes()
    assert forge.statuses(commit) == []
    again = forge.sync()
    assert again.exit_code == 0, again.output
    assert forge.statuses(commit) == [("pending", "1 pending")]
    clock.converged("Gitea stopped (SIGTERM) at the status post")
    assert forge.notes() == notes  # the note was there: not written again
    assert forge.sync().exit_code == 0
    assert forge.statuses(commit) == [("pending", "1 pending")]


# -- the Pushgateway down -------------------------------------------------------------


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pushgateway]:
    with Pushgateway(tmp_path_factory.mktemp("pushgateway")) as server:
        yield server


@pytest.mark.timeout(60)
def test_the_pushgateway_killed_mid_sync_fails_the_metrics_alone(
    gateway: Pushgateway,
    cluster: RealCluster,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
    at_the_note_push: Callable[..., None],
) -> None:
    remote = make_git_remote("jobs", files={"train.yaml": yaml.safe_dump(mxjob("train"))})
    args = ["--repo", remote.url, "--kubeconfig", str(cluster.kubeconfig)]
    args += ["--cache-dir", str(tmp_path / "cache"), "--pushgateway", gateway.url]
    clock = Clock()
    at_the_note_push(clock.struck(gateway.kill), before=False)
    try:
        faulted = sync_cli(*args)
    finally:
        if gateway.process is not None and gateway.process.poll() is not None:
            clock.restarted(gateway.start_again)
    assert faulted.exit_code == 3, faulted.output
    assert "the metrics were not pushed" in faulted.output, faulted.output
    assert noted(remote.note(remote.rev())) == {"train": "Pending"}  # the note went on
    assert len(batch_job_names(cluster)) == 4  # and the apply: a dist job's 4 batch Jobs
    assert gateway.scrape() == {}  # it lost what it held
    again = sync_cli(*args)
    assert again.exit_code == 0, again.output
    pushed = gateway.scrape()
    ours = [s for s in pushed["mxgitops_sync_exit_code"] if s.labels["instance"] == INSTANCE]
    assert [s.value for s in ours] == [0]
    clock.converged("the Pushgateway SIGKILLed mid-sync")


def batch_job_names(cluster: RealCluster) -> list[str]:
    return [j["metadata"]["name"] for j in cluster.objects("jobs", NS)]


# -- Kueue's controller manager killed: a job queued, a gang being preempted ------------


class Queued:
    """Syncs of a git repository (notes on it) against the JobSet+Kueue cluster."""

    def __init__(self, eco: Ecosystem, remote: GitRemote, cache: Path) -> None:
        self.eco, self.remote = eco, remote
        self.syncer = Syncer(eco, remote.work, cache=cache)  # type: ignore[arg-type]
        self.outcomes: list[SyncOutcome] = []

    def commit(self, *docs: dict[str, Any]) -> None:
        self.remote.commit({f"{d['metadata']['name']}.yaml": yaml.safe_dump(d) for d in docs})

    def __call__(self) -> SyncOutcome:
        outcome = self.syncer(repo=self.remote.url)
        assert outcome.note_error == "", outcome.note_error
        self.outcomes.append(outcome)
        return outcome

    def states(self) -> dict[str, str]:
        """The note on the tip: each job's state as the last sync saw it."""
        return noted(self.remote.note(self.remote.rev()))

    def never_failed_nor_finished(self, job: str, *, beside: str) -> None:
        """In no sync was `job` Failed, Succeeded, or recorded finished in the ledger,
        while `beside`, which finished, was recorded."""
        recorded = {c.key for o in self.outcomes for c in o.plan.ledger_changes}
        assert (NS, beside) in recorded and (NS, job) not in recorded, recorded
        states = [j.state for o in self.outcomes for j in o.summary.jobs if j.name == job]
        assert states and not {"Failed", "Succeeded"} & set(states), states


@pytest.fixture
def queued(
    ecosystem: Ecosystem, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> Iterator[Queued]:
    controllers = ecosystem.controllers
    assert controllers is not None
    yield Queued(ecosystem, make_git_remote("jobs", files={"README": "jobs\n"}), tmp_path / "c")
    process = controllers.kueue.process
    if process is not None and process.poll() is not None:
        controllers.start_kueue_again()  # the other tests of the group share it


def kill_kueue(eco: Ecosystem) -> None:
    assert eco.controllers is not None
    eco.controllers.kill_kueue()


def start_kueue_again(eco: Ecosystem) -> None:
    assert eco.controllers is not None
    eco.controllers.start_kueue_again()


def workload_conditions(eco: Ecosystem, jobset: str) -> list[dict[str, Any]] | None:
    """The conditions of `jobset`'s Workload, None until Kueue has made it."""
    for workload in eco.workloads(NS):
        if workload["metadata"]["ownerReferences"][0]["name"] == jobset:
            return list((workload.get("status") or {}).get("conditions") or [])
    return None


def quota_judged(eco: Ecosystem, jobset: str) -> bool:
    """Kueue has looked at `jobset`'s Workload (admitted or not)."""
    conditions = workload_conditions(eco, jobset) or []
    return any(c["type"] == "QuotaReserved" for c in conditions)


def evicted(eco: Ecosystem, jobset: str) -> bool:
    """Kueue has decided to preempt `jobset`'s Workload (its Evicted condition)."""
    conditions = workload_conditions(eco, jobset) or []
    return any(c["type"] == "Evicted" and c["status"] == "True" for c in conditions)


@pytest.mark.timeout(300)
def test_kueue_killed_while_a_job_is_queued_admits_it_once_back(queued: Queued) -> None:
    eco = queued.eco
    kueue_setup(eco, gpus=8)
    queued.commit(gpu_job("first"))  # alone: Kueue admits whichever it sees first
    assert queued().ok
    first = only_jobset(eco, "first")["metadata"]["name"]
    until(eco, "first", "admitted", lambda js: js["spec"].get("suspend") is False)
    queued.commit(gpu_job("first"), gpu_job("second"))
    assert queued().ok
    second = only_jobset(eco, "second")["metadata"]["name"]
    wait_for("Kueue to judge the second", lambda: quota_judged(eco, second))
    assert summary_of(queued(), "second").state == "Queued"
    clock = Clock()
    clock.struck(lambda: kill_kueue(eco))()
    try:
        # Kueue down (its webhooks too: Kubernetes' job controller cannot update the
        # first's Jobs until it is back): a sync reads what it left; a job submitted
        # now cannot be created (Kueue's webhook refuses every JobSet): said, retried.
        queued.commit(gpu_job("first"), gpu_job("second"), gpu_job("third"))
        outcome = queued()
        assert not outcome.ok  # the CLI's exit 1: a job failed to apply
        assert summary_of(outcome, "second").state == "Queued"
        [refused] = summary_of(outcome, "third").errors
        assert 'failed calling webhook "mjobset.kb.io"' in refused, refused
        assert queued.states() == {"first": "Pending", "second": "Queued", "third": "Pending"}
        assert len(eco.jobsets(NS)) == 2
    finally:
        clock.restarted(lambda: start_kueue_again(eco))
    step(eco, pod_of(eco, first, "scheduler"), phase="Running")
    step(eco, pod_of(eco, first, "scheduler"), phase="Succeeded")
    until(eco, "first", "Completed", lambda js: condition(js, "Completed") is not None)
    until(eco, "second", "admitted", lambda js: js["spec"].get("suspend") is False)
    assert summary_of(queued(), "third").action == "create"  # retried, Kueue back
    pod_of(eco, second, "scheduler")
    outcome = queued()
    assert [summary_of(outcome, job).action for job in ("second", "third")] == ["unchanged"] * 2
    assert summary_of(outcome, "second").state in ("Pending", "Running")
    assert queued.states() == {
        "first": "Succeeded",
        "second": summary_of(outcome, "second").state,
        "third": "Queued",
    }
    clock.converged("Kueue SIGKILLed with a job queued")
    third = only_jobset(eco, "third")["metadata"]["name"]
    assert [j["metadata"]["name"] for j in eco.jobsets(NS)] == [first, second, third]
    queued.never_failed_nor_finished("second", beside="first")


@pytest.mark.timeout(300)
def test_kueue_killed_while_it_preempts_a_gang_requeues_it_never_failed(
    queued: Queued,
) -> None:
    eco = queued.eco
    kueue_setup(eco, gpus=8, preemption=True, workload_priorities=True)
    queued.commit(gpu_job("low"))
    assert queued().ok
    low = only_jobset(eco, "low")["metadata"]["name"]
    until(eco, "low", "admitted", lambda js: js["spec"].get("suspend") is False)
    step(eco, pod_of(eco, low, "scheduler"), phase="Running")
    for index in (0, 1):
        step(eco, pod_of(eco, low, "worker", index), phase="Running")
    queued.commit(gpu_job("low"), gpu_job("high", priority="high"))
    assert queued().ok
    wait_for("Kueue to preempt the lower gang", lambda: evicted(eco, low))
    clock = Clock()
    clock.struck(lambda: kill_kueue(eco))()
    # Where the kill landed, for the figures (both seen: before and after Kueue suspended
    # the lower JobSet, the higher not yet admitted); what is asserted below is the same.
    suspended = {j["metadata"]["name"]: j["spec"].get("suspend") for j in eco.jobsets(NS)}
    print(f"\nKueue killed with the JobSets' suspend at {suspended}")
    try:
        outcome = queued()  # Kueue down in the middle of its preemption
        assert outcome.ok
        assert summary_of(outcome, "low").state in ("Running", "Preempted")
    finally:
        clock.restarted(lambda: start_kueue_again(eco))
    until(eco, "high", "admitted", lambda js: js["spec"].get("suspend") is False)
    high = only_jobset(eco, "high")["metadata"]["name"]
    assert summary_of(queued(), "low").state == "Preempted"
    assert queued.states()["low"] == "Preempted"
    step(eco, pod_of(eco, high, "scheduler"), phase="Running")
    step(eco, pod_of(eco, high, "scheduler"), phase="Succeeded")
    until(eco, "low", "readmitted", lambda js: js["spec"].get("suspend") is False)
    pod_of(eco, low, "scheduler")  # the gang runs again
    outcome = queued()
    assert summary_of(outcome, "low").state in ("Pending", "Running")
    assert summary_of(outcome, "low").action == "unchanged"
    assert queued.states() == {"high": "Succeeded", "low": summary_of(outcome, "low").state}
    clock.converged("Kueue SIGKILLed while preempting a gang")
    assert sorted(j["metadata"]["name"] for j in eco.jobsets(NS)) == sorted([high, low])
    queued.never_failed_nor_finished("low", beside="high")
