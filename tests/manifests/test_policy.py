"""The policy: each key alone and together, on both dialects, in validate and diff;
the operator's policy over the repository's, key by key; malformed policies.
(Sync, where a violating job is held, is in tests/e2e/test_policy_sync.py.)"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from mxgitops.cli import ExitCode, main
from mxgitops.manifests import policy
from mxgitops.manifests.loading import load
from tests.gitrepos.fixtures import GitRemote
from tests.helpers import corpus
from tests.helpers.corpus import Corpus
from tests.helpers.policy import (
    DIALECTS,
    KEYS,
    STRICT,
    checked,
    gpus,
    manifest,
    passing_everything,
    policy_messages,
    repo,
    violating_everything,
)

__all__ = ["repo"]  # fixtures from tests/helpers, used here

REPO = Path(__file__).resolve().parents[2]


# Where each key's violation is reported (the end of the field path).
FIELDS = {
    "allowedNamespaces": r"metadata\.namespace",
    "podSecurity": r"template\.spec\.containers\[0\]\.securityContext\.[\w.]+",
    "allowedImages": r"template\.spec\.containers\[0\]\.image",
    "requireResourceLimits": r"template\.spec\.containers\[0\]\.resources\.limits",
    "maxReplicasPerJob": r"spec",
    "maxGpusPerJob": r"spec",
    "allowedServiceAccounts": r"template\.spec\.serviceAccountName",
    "allowedPriorityClasses": r"template\.spec\.priorityClassName",
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("key", sorted(KEYS))
def test_each_key_alone(tmp_path: Path, key: str, dialect: str) -> None:
    strict, _, violating, passing = KEYS[key]
    refused = checked(tmp_path, manifest(dialect, **violating), {key: strict}, {})
    assert [j.name for j in refused.held] == ["train"] and refused.jobs == []
    messages = policy_messages(refused)
    assert messages and all(m.startswith(f"policy: {key}") for m in messages), messages
    assert all(re.search(FIELDS[key] + "$", p.field) for p in refused.problems)
    assert not refused.ok and refused.invalid_keys == frozenset()
    allowed = checked(tmp_path, manifest(dialect, **passing), {key: strict}, {})
    assert allowed.ok and [j.name for j in allowed.jobs] == ["train"], allowed.problems


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_key_at_once(tmp_path: Path, dialect: str) -> None:
    result = checked(tmp_path, violating_everything(dialect), STRICT, {})
    reported = {m.split(":")[1].split()[0] for m in policy_messages(result)}
    assert reported == set(KEYS)
    allowed = checked(tmp_path, manifest(dialect, **passing_everything()), STRICT, {})
    assert allowed.ok, allowed.problems


@pytest.mark.parametrize("key", sorted(KEYS))
def test_the_stricter_of_operator_and_repository_wins(tmp_path: Path, key: str) -> None:
    strict, loose, violating, _ = KEYS[key]
    text = manifest("kubeflow", **violating)
    for operator, repository, source in (
        (strict, loose, policy.OPERATOR),
        (loose, strict, policy.REPOSITORY),
    ):
        result = checked(tmp_path, text, {key: operator}, {key: repository})
        messages = policy_messages(result)
        assert messages and all(source in m for m in messages), (operator, repository, messages)
    assert checked(tmp_path, text, {key: loose}, {key: loose}).ok


def test_the_operator_may_loosen_the_defaults_and_the_repository_may_not(tmp_path: Path) -> None:
    privileged = manifest("seed", container={"securityContext": {"privileged": True}})
    assert not checked(tmp_path, privileged, {}, {"podSecurity": "privileged"}).ok
    assert checked(tmp_path, privileged, {"podSecurity": "privileged"}, {}).ok
    elsewhere = manifest("seed", namespace="team-b")
    assert not checked(tmp_path, elsewhere, {}, {"allowedNamespaces": ["team-b"]}).ok
    assert checked(tmp_path, elsewhere, {"allowedNamespaces": ["team-b"]}, {}).ok
    many = manifest("seed", workers=300)
    assert not checked(tmp_path, many, {}, {"maxReplicasPerJob": 1000}).ok
    assert checked(tmp_path, many, {"maxReplicasPerJob": 1000}, {}).ok


def test_the_defaults(tmp_path: Path) -> None:
    """baseline, the default namespace, the default account, 256 replicas, 64 GPUs."""
    assert checked(tmp_path, manifest("kubeflow"), {}, {}).ok
    for arguments in (
        {"namespace": "kube-system"},
        {"pod": {"hostPID": True}},
        {"pod": {"serviceAccountName": "cluster-admin"}},
        {"workers": 255},
        {"workers": 31, "container": gpus(2)},
        {"pod": {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}},
    ):
        assert not checked(tmp_path, manifest("kubeflow", **arguments), {}, {}).ok, arguments
    for arguments in (
        {"workers": 254},
        {"workers": 30, "container": gpus(2)},
        {"image": "anything.example/at/all:1"},
        {"pod": {"serviceAccountName": "default"}},
    ):
        assert checked(tmp_path, manifest("kubeflow", **arguments), {}, {}).ok, arguments


def test_gpus_of_every_vendor_count(tmp_path: Path) -> None:
    assert policy.is_gpu("nvidia.com/gpu") and policy.is_gpu("amd.com/gpu")
    assert policy.is_gpu("gpu.intel.com/i915") and not policy.is_gpu("cpu")
    mixed = {"resources": {"limits": {"nvidia.com/gpu": "2", "amd.com/gpu": 1, "cpu": "64"}}}
    result = checked(tmp_path, manifest("seed", container=mixed), {"maxGpusPerJob": 8}, {})
    assert policy_messages(result) == [
        "policy: maxGpusPerJob: 9 GPUs in all replicas, more than 8 (the operator's policy)"
    ]


def test_the_issues_example_is_refused_for_every_reason(tmp_path: Path) -> None:
    """kube-system, privileged, a hostPath of /, hostPID and a powerful account."""
    hostile = manifest(
        "kubeflow",
        namespace="kube-system",
        container={"securityContext": {"privileged": True}},
        pod={
            "hostPID": True,
            "serviceAccountName": "clusterrole-aggregation-controller",
            "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
        },
    )
    messages = " ".join(policy_messages(checked(tmp_path, hostile, {}, {})))
    for fragment in (
        "allowedNamespaces: namespace kube-system is not allowed",
        "Privileged Containers",
        "HostPath Volumes",
        "Host Namespaces",
        "allowedServiceAccounts: service account clusterrole-aggregation-controller",
    ):
        assert fragment in messages


# -- the command line ---------------------------------------------------------------------


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_validate_reports_a_violation_like_any_problem(repo: Path, dialect: str) -> None:
    (repo / "jobs/train.yaml").write_text(manifest(dialect, pod={"hostNetwork": True}))
    result = invoke("validate")
    assert result.exit_code == ExitCode.FAILED
    line = result.stdout.splitlines()[0]
    assert re.fullmatch(
        r"jobs/train\.yaml:\d+: job train: spec\.\S+\.template\.spec\.hostNetwork: policy: "
        r"podSecurity baseline \(the default policy\): Host Namespaces \(baseline\): must not be "
        r"true",
        line,
    ), line
    assert result.stdout.splitlines()[-1].startswith("0 jobs valid, 1 invalid manifest, 3 problems")


def test_validate_reads_both_policies(repo: Path) -> None:
    (repo / "jobs/train.yaml").write_text(manifest("seed", image="docker.io/x/mxnet"))
    (repo / ".mxgitops.yaml").write_text("policy:\n  maxReplicasPerJob: 2\n")
    operator = repo / "operator.yaml"
    operator.write_text("policy:\n  allowedImages: [registry.example.com/]\n")
    result = invoke("validate", "jobs", "--policy-file", operator)
    assert result.exit_code == ExitCode.FAILED
    assert "policy: maxReplicasPerJob: 3 replicas in all, more than 2 (.mxgitops.yaml's" in (
        result.stdout
    )
    assert "policy: allowedImages: image docker.io/x/mxnet" in result.stdout
    env = CliRunner().invoke(
        main, ["validate", "jobs"], env={"MXGITOPS_POLICY_FILE": str(operator)}
    )
    assert "allowedImages" in env.stdout


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("policy:\n  maxGpus: 4\n", "policy.maxGpus: not a policy key (known: allowedNamespaces"),
        ("policy:\n  podSecurity: strict\n", "expected one of privileged, baseline, restricted"),
        ("policy:\n  allowedImages: registry/\n", "expected a list of strings, got 'registry/'"),
        ("policy:\n  maxReplicasPerJob: -1\n", "expected a whole number of at least 0"),
        ("policy:\n  requireResourceLimits: 'yes'\n", "expected true or false"),
        ("policy: [podSecurity]\n", "expected a mapping"),
    ],
)
def test_a_malformed_policy_is_a_usage_error(repo: Path, text: str, error: str) -> None:
    (repo / ".mxgitops.yaml").write_text(text)
    result = invoke("validate", "jobs")
    assert result.exit_code == ExitCode.USAGE == 2, result.output
    assert error in result.stderr
    (repo / ".mxgitops.yaml").unlink()
    (repo / "operator.yaml").write_text(text)
    result = invoke("validate", "jobs", "--policy-file", repo / "operator.yaml")
    assert result.exit_code == ExitCode.USAGE and error in result.stderr
    (repo / "operator.yaml").write_text("podSecurity: baseline\n")
    result = invoke("validate", "jobs", "--policy-file", repo / "operator.yaml")
    assert result.exit_code == ExitCode.USAGE
    assert "must be one YAML mapping with a single key, policy" in result.stderr


def test_the_policy_file_is_the_operators(repo: Path) -> None:
    (repo / ".mxgitops.yaml").write_text("policyFile: /tmp/loose.yaml\ntenancy: {}\n")
    result = invoke("validate", "jobs")
    assert result.exit_code == ExitCode.FAILED
    assert "policyFile: only the operator may set this (--policy-file or MXGITOPS_POLICY_FILE" in (
        result.stdout
    )
    assert "tenancy: only the operator may set this (--tenant-service-account or " in result.stdout


def test_the_jobs_repository_example_passes_its_policy(repo: Path) -> None:
    example = REPO / "jobs-repo-example"
    settings = yaml.safe_load((example / ".mxgitops.yaml").read_text())
    rules = policy.combine({}, policy.parse(settings.get("policy"), where="", source=""))
    loaded = load(example / settings["path"], default_namespace=settings["namespace"], policy=rules)
    assert loaded.ok and loaded.jobs, loaded.problems


@pytest.mark.parametrize("examples", corpus.params())
def test_the_example_manifests_pass_the_default_policy(examples: Corpus) -> None:
    loaded = load(examples.root, policy=policy.combine({}))
    assert len(loaded.jobs) == len(examples.trainable())  # none held: only MXTune refused
    assert not [p for p in loaded.problems if p.message.startswith("policy: ")]


# -- diff -----------------------------------------------------------------------------------


def test_diff_marks_a_pull_request_that_adds_a_violation(
    make_git_remote: Callable[..., GitRemote], git_isolation: None
) -> None:
    remote = make_git_remote(
        "jobs",
        files={
            "jobs/a.yaml": manifest("seed", "alpha"),
            "jobs/b.yaml": manifest("kubeflow", "beta"),
        },
    )
    base = remote.rev()
    remote.commit(
        {"jobs/b.yaml": manifest("kubeflow", "beta", pod={"hostPID": True})}, "debug with hostPID"
    )
    result = invoke("diff", base, "HEAD", "--repo", remote.work, "--path", "jobs")
    assert result.exit_code == ExitCode.FAILED
    assert result.stdout.splitlines()[0].endswith("3 new problems, 3 of them policy violations")
    assert "- default/beta" not in result.stdout  # held by the policy, not pruned
    markdown = invoke(
        "diff", base, "HEAD", "--repo", remote.work, "--path", "jobs", "-o", "markdown"
    )
    assert "**This change adds 3 policy violations**: a sync neither creates nor changes" in (
        markdown.stdout
    )
    clean = invoke("diff", base, base, "--repo", remote.work, "--path", "jobs", "-o", "markdown")
    assert clean.exit_code == 0 and "policy violations" not in clean.stdout


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("key", sorted(KEYS))
def test_diff_marks_each_key(
    make_git_remote: Callable[..., GitRemote], tmp_path: Path, key: str, dialect: str
) -> None:
    strict, _, violating, passing = KEYS[key]
    remote = make_git_remote("jobs", files={"jobs/t.yaml": manifest(dialect, **passing)})
    base = remote.rev()
    remote.commit({"jobs/t.yaml": manifest(dialect, **violating)}, "violate")
    operator = tmp_path / "policy.yaml"
    operator.write_text(yaml.safe_dump({"policy": {key: strict}}))
    args = ("--repo", remote.work, "--path", "jobs", "--policy-file", operator, "-o", "json")
    result = invoke("diff", base, "HEAD", "-n", "ml", *args)
    assert result.exit_code == ExitCode.FAILED, result.output
    found = yaml.safe_load(result.stdout)
    messages = [p["message"] for p in found["policy_violations"]]
    assert messages and all(m.startswith(f"policy: {key}") for m in messages)
    # Held, neither replaced nor pruned; the job that moved namespace leaves its old one.
    moved = ["ml/train"] if key == "allowedNamespaces" else []
    assert [f"{j['namespace']}/{j['name']}" for j in found["removed"]] == moved
    assert found["changed"] == []
    assert invoke("diff", base, base, "-n", "ml", *args).exit_code == 0


def test_a_missing_operator_policy_fails_closed(repo: Path) -> None:
    """A sync whose policy file is gone stops (exit 2) rather than run under the defaults."""
    (repo / "jobs/train.yaml").write_text(manifest("seed"))
    missing = repo / "gone.yaml"
    result = invoke("sync", "--dry-run", "--repo", repo, "--path", "jobs", "--policy-file", missing)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert f"policy file {missing}: cannot read" in result.stderr
