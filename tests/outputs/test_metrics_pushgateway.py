"""Metrics pushed to a real Prometheus Pushgateway (tests/pushgateway), read back by
scraping its /metrics and parsing the text as Prometheus would."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.commands.sync import SyncOutcome, sync
from mxgitops.errors import GitError
from mxgitops.kube import cluster
from mxgitops.settings.config import SyncConfig
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.sync import NS, RETRY, mxjob
from tests.kubeapi.harness import KubeAPI
from tests.pushgateway.server import Pushgateway

INSTANCE = "metrics"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pushgateway]:
    with Pushgateway(tmp_path_factory.mktemp("pushgateway")) as server:
        yield server


@pytest.fixture
def pushgateway(gateway: Pushgateway) -> Pushgateway:
    gateway.wipe()
    return gateway


def config(api: KubeAPI, repo: str, cache: Path, **extra: Any) -> SyncConfig:
    return SyncConfig(
        repo=repo,
        kubeconfig=api.kubeconfig,
        namespace=NS,
        instance=INSTANCE,
        cache_dir=cache,
        **extra,
    )


def run(api: KubeAPI, settings: SyncConfig) -> SyncOutcome:
    api.settle()
    connect = functools.partial(cluster.connect, retry=RETRY, sleep=lambda _: None)
    return sync(settings, explicit=frozenset({"namespace", "instance"}), connect=connect)


def value(samples: dict[str, list[Any]], name: str, **labels: str) -> float:
    found = [
        s.value
        for s in samples[name]
        if s.labels.get("instance") == INSTANCE
        and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, (name, labels, samples.get(name))
    return float(found[0])


def test_a_sync_pushes_its_group_and_a_failed_one_keeps_the_last_success(
    kubeapi: KubeAPI,
    pushgateway: Pushgateway,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
) -> None:
    remote = make_git_remote("jobs", files={"train.yaml": yaml.safe_dump(mxjob("train"))})
    settings = config(
        kubeapi, remote.bare.as_uri(), tmp_path / "cache", pushgateway=pushgateway.url
    )
    outcome = run(kubeapi, settings)
    assert outcome.undelivered == ()
    pushed = pushgateway.scrape()
    assert value(pushed, "mxgitops_sync_success") == 1
    assert value(pushed, "mxgitops_sync_exit_code") == 0
    started = value(pushed, "mxgitops_sync_start_timestamp_seconds")
    ended = value(pushed, "mxgitops_sync_end_timestamp_seconds")
    assert started <= ended
    assert value(pushed, "mxgitops_sync_duration_seconds") == pytest.approx(ended - started)
    assert value(pushed, "mxgitops_last_success_timestamp_seconds") == ended
    assert value(pushed, "mxgitops_jobs", state="Pending") == 1
    assert value(pushed, "mxgitops_jobs", state="Failed") == 0
    assert (
        value(pushed, "mxgitops_sync_objects_written", action="create") == 5
    )  # dist: 4 Jobs, 1 Service
    assert value(pushed, "mxgitops_sync_errors", phase="git") == 0
    assert value(pushed, "mxgitops_sync_commit_info", commit=outcome.summary.commit) == 1
    # A sync that changes nothing pushes zeros, not nothing: no value outlives its sync.
    run(kubeapi, settings)
    again = pushgateway.scrape()
    assert value(again, "mxgitops_sync_objects_written", action="create") == 0
    assert value(again, "mxgitops_sync_jobs", action="unchanged") == 1
    ended = value(again, "mxgitops_last_success_timestamp_seconds")
    # One group per instance, no per-pod label: the group's labels are job and instance.
    groups = {tuple(sorted(s.labels)) for s in pushed["mxgitops_sync_success"]}
    assert groups == {("instance", "job")}

    # A sync that cannot fetch: success 0, its exit code, the error's phase; the last
    # success is still the one before.
    broken = config(
        kubeapi, (tmp_path / "gone.git").as_uri(), tmp_path / "cache2", pushgateway=pushgateway.url
    )
    with pytest.raises(GitError):
        run(kubeapi, broken)
    after = pushgateway.scrape()
    assert value(after, "mxgitops_sync_success") == 0
    assert value(after, "mxgitops_sync_errors", phase="git") == 1
    assert value(after, "mxgitops_last_success_timestamp_seconds") == ended
    assert value(after, "mxgitops_sync_end_timestamp_seconds") >= ended


def test_the_cli_pushes_its_exit_code(
    kubeapi: KubeAPI,
    pushgateway: Pushgateway,
    make_git_remote: Callable[..., GitRemote],
    tmp_path: Path,
) -> None:
    remote = make_git_remote("jobs", files={"train.yaml": yaml.safe_dump(mxjob("train"))})
    args = [
        "sync",
        "--repo",
        remote.bare.as_uri(),
        "--kubeconfig",
        str(kubeapi.kubeconfig),
        "-n",
        NS,
        "--instance",
        INSTANCE,
        "--cache-dir",
        str(tmp_path / "cache"),
        "--pushgateway",
        pushgateway.url,
    ]
    kubeapi.settle()
    assert CliRunner().invoke(main, args).exit_code == 0
    failed = [*args[:2], (tmp_path / "nothing.git").as_uri(), *args[3:]]
    result = CliRunner().invoke(main, failed)
    assert result.exit_code == 3, result.output
    assert value(pushgateway.scrape(), "mxgitops_sync_exit_code") == 3


def test_a_pushgateway_that_cannot_be_reached_fails_nothing_else(
    kubeapi: KubeAPI, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    """The sync applies and writes its note; the push is one line; the exit code is as
    for a note that could not be pushed."""
    from tests.controlplane.launcher import free_port

    remote = make_git_remote("jobs", files={"train.yaml": yaml.safe_dump(mxjob("train"))})
    nowhere = f"http://127.0.0.1:{free_port()}"
    outcome = run(
        kubeapi, config(kubeapi, remote.bare.as_uri(), tmp_path / "cache", pushgateway=nowhere)
    )
    assert outcome.summary.ok and outcome.note_written
    assert [j.action for j in outcome.summary.jobs] == ["create"]
    [line] = outcome.undelivered
    assert line.startswith(f"the metrics were not pushed to {nowhere}: ")
