"""End to end against a real Gitea (tests/gitea): the jobs repository lives on it, a sync
clones it over HTTP, pushes its note to it and posts commit statuses, and the test
reads each commit's combined status back through Gitea's own API through a job's life.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.commands.sync import SyncOutcome, sync
from mxgitops.kube import cluster
from mxgitops.settings.config import SyncConfig
from tests.gitea.server import ADMIN, Gitea
from tests.gitrepos.fixtures import run_git
from tests.helpers.gitsync import gitea
from tests.helpers.sync import NS, RETRY, batch_job, mxjob
from tests.kubeapi.harness import KubeAPI

__all__ = ["gitea"]  # fixtures from tests/helpers, used here

INSTANCE = "forge"
CONTEXT = f"mxgitops/{INSTANCE}"


@pytest.fixture(autouse=True)
def _git(git_isolation: None) -> None:
    pass


class JobsRepository:
    """A repository on the Gitea, a work clone that pushes to it, and syncs of it."""

    def __init__(self, gitea: Gitea, name: str, work: Path, api: KubeAPI, cache: Path) -> None:
        self.gitea, self.name, self.api, self.cache = gitea, name, api, cache
        self.url = gitea.create_repository(name).replace("://", f"://{ADMIN}@")
        self.token = gitea.token(f"sync-{name}", ["write:repository"])
        self.work = work
        run_git("init", "-q", "-b", "main", str(work), cwd=work.parent)
        push_url = self.url.replace(f"{ADMIN}@", f"{ADMIN}:{self.token}@")
        run_git("remote", "add", "origin", push_url, cwd=work)

    def commit(self, *docs: dict[str, Any], message: str = "jobs") -> str:
        for doc in docs:
            (self.work / f"{doc['metadata']['name']}.yaml").write_text(yaml.safe_dump(doc))
        run_git("add", "-A", cwd=self.work)
        run_git("commit", "-q", "-m", message, cwd=self.work)
        run_git("push", "-q", "origin", "main", cwd=self.work)
        return run_git("rev-parse", "HEAD", cwd=self.work)

    def sync(self) -> SyncOutcome:
        self.api.settle()
        config = SyncConfig(
            repo=self.url,
            git_token=self.token,
            kubeconfig=self.api.kubeconfig,
            namespace=NS,
            instance=INSTANCE,
            cache_dir=self.cache,
            status_provider="gitea",
            status_token=self.token,
            status_url="https://dashboards.example/d/mxgitops?commit={commit}",
        )
        connect = functools.partial(cluster.connect, retry=RETRY, sleep=lambda _: None)
        explicit = frozenset({"namespace", "instance"})
        return sync(config, explicit=explicit, connect=connect)

    def status(self, commit: str) -> tuple[str, str]:
        """The state and description Gitea shows under mxgitops' context on `commit`."""
        combined = self.gitea.combined_status(self.name, commit, self.token)
        ours = [s for s in combined["statuses"] if s["context"] == CONTEXT]
        assert len(ours) == 1, combined
        return ours[0]["status"], ours[0]["description"]

    def posted(self, commit: str) -> int:
        return len(self.gitea.statuses(self.name, commit, self.token))


@pytest.fixture
def jobs(gitea: Gitea, kubeapi: KubeAPI, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    name = f"jobs-{request.node.callspec.params['kubeapi']}-{request.node.name.split('[')[0][-20:]}"
    work = tmp_path / "work"
    work.mkdir()
    return JobsRepository(gitea, name.replace("_", "-"), work, kubeapi, tmp_path / "cache")


def test_commit_statuses_follow_a_jobs_life_on_a_real_gitea(
    jobs: JobsRepository, kubeapi: KubeAPI
) -> None:
    first = jobs.commit(mxjob("train", servers=0), message="submit train")
    outcome = jobs.sync()
    assert (outcome.note_error, outcome.undelivered) == ("", ())
    assert jobs.status(first) == ("pending", "1 pending")
    statuses = jobs.gitea.statuses(jobs.name, first, jobs.token)
    assert statuses[0]["target_url"] == f"https://dashboards.example/d/mxgitops?commit={first}"
    # The note went to the Gitea too.
    notes = run_git("ls-remote", "origin", "refs/notes/mxgitops", cwd=jobs.work)
    assert notes.endswith("refs/notes/mxgitops")

    # A sync that changes nothing posts nothing.
    before = jobs.posted(first)
    assert jobs.sync().undelivered == ()
    assert jobs.posted(first) == before

    kubeapi.run_job_controller(NS)
    worker = batch_job(kubeapi, "train", "worker")
    kubeapi.kubelet(job=worker, namespace=NS, phase="Running")
    jobs.sync()
    assert jobs.status(first) == ("pending", "1 running")
    kubeapi.kubelet(job=worker, namespace=NS, phase="Succeeded")
    kubeapi.run_job_controller(NS)
    jobs.sync()
    assert jobs.status(first) == ("success", "1 succeeded")

    # A second commit submits a job that fails: its own commit fails, the first stays.
    # Never: its first failed pod fails the job (OnFailure would restart it in place).
    second = jobs.commit(mxjob("oom", servers=0, restart="Never"), message="submit oom")
    jobs.sync()
    kubeapi.run_job_controller(NS)
    kubeapi.kubelet(
        job=batch_job(kubeapi, "oom", "worker"),
        namespace=NS,
        phase="Failed",
        exit_code=137,
        reason="OOMKilled",
    )
    kubeapi.run_job_controller(NS)
    outcome = jobs.sync()
    assert outcome.undelivered == ()
    state, description = jobs.status(second)
    assert state == "failure"
    # The container's reason, then its batch Job's (a Never replica's backoffLimit is 0).
    assert description == "1 succeeded; failed: ml/oom WORKER 0 OOMKilled; BackoffLimitExceeded"
    assert jobs.status(first) == ("success", "1 succeeded")
    before = jobs.posted(first), jobs.posted(second)
    jobs.sync()
    assert (jobs.posted(first), jobs.posted(second)) == before


def test_a_status_that_cannot_be_posted_leaves_the_sync_applied(
    jobs: JobsRepository, kubeapi: KubeAPI
) -> None:
    """A token that may not post statuses: the job is created, the note pushed, the
    status reported as not posted, and the exit code is as for a note not pushed."""
    commit = jobs.commit(mxjob("train", servers=0))
    read_only = jobs.gitea.token(f"read-{jobs.name}", ["read:repository"])
    outcome = sync_with_status_token(jobs, read_only)
    assert outcome.summary.ok and outcome.note_error == ""
    [undelivered] = outcome.undelivered
    assert "1 of 1 commit statuses not posted" in undelivered
    assert "403" in undelivered
    assert [j.action for j in outcome.summary.jobs] == ["create"]
    assert jobs.gitea.statuses(jobs.name, commit, jobs.token) == []
    from click.testing import CliRunner  # the CLI's exit code for it

    from mxgitops.cli import main

    result = CliRunner().invoke(
        main,
        [
            "sync",
            "--repo",
            jobs.url,
            "--kubeconfig",
            str(kubeapi.kubeconfig),
            "-n",
            NS,
            "--instance",
            INSTANCE,
            "--cache-dir",
            str(jobs.cache),
            "--status-provider",
            "gitea",
        ],
        env={"MXGITOPS_GIT_TOKEN": jobs.token, "MXGITOPS_STATUS_TOKEN": read_only},
    )
    assert result.exit_code == 3, result.output
    assert "commit statuses not posted" in result.output


def sync_with_status_token(jobs: JobsRepository, token: str) -> SyncOutcome:
    jobs.api.settle()
    config = SyncConfig(
        repo=jobs.url,
        git_token=jobs.token,
        kubeconfig=jobs.api.kubeconfig,
        namespace=NS,
        instance=INSTANCE,
        cache_dir=jobs.cache,
        status_provider="gitea",
        status_token=token,
    )
    connect = functools.partial(cluster.connect, retry=RETRY, sleep=lambda _: None)
    return sync(config, explicit=frozenset({"namespace", "instance"}), connect=connect)


def test_gitea_is_the_pinned_release(gitea: Gitea) -> None:
    version = gitea.api("GET", "/version")["version"]
    from tests.gitea.build import VERSION

    assert version == VERSION.removeprefix("v")
