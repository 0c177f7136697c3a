"""Sync under a policy: a violating job is neither created nor changed, its live objects
stay as they are, nothing of it is written (the request log says so), and the note says
why; the other jobs go on. On the API double, and on the real control plane with
--backend real."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from mxgitops.commands.sync import sync
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.gitsync import NS, WRITES, config_for, job_names, note_summary
from tests.helpers.policy import (
    DIALECTS,
    KEYS,
    STRICT,
    manifest,
    passing_everything,
    violating_everything,
)

PRIVILEGED = {"securityContext": {"privileged": True}}


def job_writes(kubeapi: Any) -> list[str]:
    """Every write of a batch Job or a Service (a create names no object in its path)."""
    return [
        f"{e['method']} {e['path']}"
        for e in kubeapi.request_log
        if e["method"] in WRITES and e["resource"] in ("jobs", "services")
    ]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_violating_job_is_not_created_and_the_others_are(
    make_git_remote: Callable[..., GitRemote], kubeapi: Any, tmp_path: Path, dialect: str
) -> None:
    remote = make_git_remote(
        "jobs",
        files={
            "jobs/good.yaml": manifest(dialect, "good"),
            "jobs/bad.yaml": manifest(dialect, "bad", container=PRIVILEGED),
        },
    )
    outcome = sync(config_for(remote.url, tmp_path / "cache", kubeapi))
    assert not outcome.ok  # a violation is a problem, like an invalid manifest
    held = {j.name: j for j in outcome.summary.jobs}["bad"]
    assert held.action == "hold"
    assert held.reason.startswith(
        "not created: the policy forbids it (podSecurity baseline (the default policy): "
        "Privileged Containers (baseline): container 'mxnet': must not be true, and 2 more)"
    )
    # The good job's scheduler, server and worker, and its Service: nothing else.
    assert len(job_writes(kubeapi)) == 4
    assert len(job_names(kubeapi)) == 3 and all(n.startswith("good-") for n in job_names(kubeapi))
    note = note_summary(remote, remote.rev())
    assert {j.name: j.action for j in note.jobs} == {"good": "create", "bad": "hold"}
    assert any("policy: podSecurity baseline" in p for p in note.problems)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_live_job_whose_change_violates_is_left_as_it_is(
    make_git_remote: Callable[..., GitRemote], kubeapi: Any, tmp_path: Path, dialect: str
) -> None:
    remote = make_git_remote("jobs", files={"jobs/train.yaml": manifest(dialect, "train")})
    operator = tmp_path / "policy.yaml"
    operator.write_text("policy:\n  maxReplicasPerJob: 3\n")
    config = config_for(remote.url, tmp_path / "cache", kubeapi, policy_file=operator)
    assert sync(config).ok
    before = {o["metadata"]["name"]: o["metadata"]["uid"] for o in kubeapi.objects("jobs", NS)}
    assert len(before) == 3
    remote.commit({"jobs/train.yaml": manifest(dialect, "train", workers=4)}, "more workers")
    kubeapi.clear_log()
    outcome = sync(config)
    (job,) = outcome.summary.jobs
    assert job.action == "hold"
    assert job.reason == (
        "not changed: the policy forbids its manifest (maxReplicasPerJob: 6 replicas in all, "
        "more than 3 (the operator's policy)); its live objects are left as they are"
    )
    assert job_writes(kubeapi) == []
    after = {o["metadata"]["name"]: o["metadata"]["uid"] for o in kubeapi.objects("jobs", NS)}
    assert after == before
    # The manifest removed: the job is pruned as any other (the policy holds changes only).
    remote.commit({"jobs/train.yaml": None, "jobs/other.yaml": manifest(dialect, "other")}, "done")
    done = sync(replace(config, force_prune=True)).summary.jobs
    assert {j.name: j.action for j in done} == {"other": "create", "train": "delete"}


def test_the_repository_cannot_loosen_the_operators_policy_at_sync(
    make_git_remote: Callable[..., GitRemote], kubeapi: Any, tmp_path: Path
) -> None:
    remote = make_git_remote(
        "jobs",
        files={
            "jobs/train.yaml": manifest("kubeflow", "train", image="docker.io/me/mxnet"),
            ".mxgitops.yaml": "policy:\n  allowedImages: []\n  podSecurity: privileged\n",
        },
    )
    operator = tmp_path / "policy.yaml"
    operator.write_text("policy:\n  allowedImages: [registry.example.com/]\n")
    config = config_for(remote.url, tmp_path / "cache", kubeapi, policy_file=operator)
    (job,) = sync(config).summary.jobs
    assert job.action == "hold" and "allowedImages: image docker.io/me/mxnet" in job.reason
    assert job_writes(kubeapi) == []


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("key", sorted(KEYS))
def test_each_key_holds_its_violating_job(
    make_git_remote: Callable[..., GitRemote], kubeapi: Any, tmp_path: Path, key: str, dialect: str
) -> None:
    strict, _, violating, passing = KEYS[key]
    remote = make_git_remote(
        "jobs",
        files={
            "jobs/bad.yaml": manifest(dialect, "bad", **violating),
            "jobs/good.yaml": manifest(dialect, "good", **{**passing, "namespace": None}),
        },
    )
    operator = tmp_path / "policy.yaml"
    operator.write_text(yaml.safe_dump({"policy": {key: strict, "allowedNamespaces": ["ml", NS]}}))
    if key == "allowedNamespaces":
        operator.write_text(yaml.safe_dump({"policy": {key: [*strict, NS]}}))
    config = config_for(remote.url, tmp_path / "cache", kubeapi, policy_file=operator)
    outcome = sync(config)
    jobs = {j.name: j for j in outcome.summary.jobs}
    assert jobs["bad"].action == "hold"
    assert jobs["bad"].reason.startswith(f"not created: the policy forbids it ({key}")
    assert jobs["good"].action == "create", outcome.summary.problems
    assert len(job_writes(kubeapi)) == 4  # the good job's three batch Jobs and its Service
    assert {o["metadata"]["namespace"] for o in kubeapi.objects("jobs")} == {NS}


def test_a_new_operator_policy_applies_to_the_same_commit(
    make_git_remote: Callable[..., GitRemote], kubeapi: Any, tmp_path: Path
) -> None:
    """The remembered verdict on a Git tree is the verdict under one policy only."""
    remote = make_git_remote("jobs", files={"jobs/train.yaml": manifest("seed", "train")})
    operator = tmp_path / "policy.yaml"
    operator.write_text("policy:\n  maxReplicasPerJob: 3\n")
    config = config_for(remote.url, tmp_path / "cache", kubeapi, policy_file=operator)
    assert [j.action for j in sync(config).summary.jobs] == ["create"]
    operator.write_text("policy:\n  maxReplicasPerJob: 2\n")
    (job,) = sync(config).summary.jobs
    assert job.action == "hold" and "more than 2 (the operator's policy)" in job.reason


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_key_at_once(
    make_git_remote: Callable[..., GitRemote], kubeapi: Any, tmp_path: Path, dialect: str
) -> None:
    remote = make_git_remote(
        "jobs",
        files={
            "jobs/bad.yaml": violating_everything(dialect, "bad"),
            "jobs/good.yaml": manifest(dialect, "good", **passing_everything()),
        },
    )
    operator = tmp_path / "policy.yaml"
    operator.write_text(yaml.safe_dump({"policy": STRICT}))
    config = config_for(remote.url, tmp_path / "cache", kubeapi, policy_file=operator)
    if hasattr(kubeapi, "ensure_namespace"):  # the real API server needs the namespace
        kubeapi.ensure_namespace("ml")
    jobs = {j.qualified_name: j for j in sync(config).summary.jobs}
    assert jobs["other/bad"].action == "hold"
    reason = jobs["other/bad"].reason
    assert reason.startswith(
        "not created: the policy forbids it (allowedNamespaces: namespace other is not allowed"
    )
    assert re.search(r", and \d+ more\)$", reason), reason
    assert jobs["ml/good"].action == "create" and not jobs["ml/good"].errors
    assert len(job_writes(kubeapi)) == 4
    assert kubeapi.objects("jobs", "other") == []
