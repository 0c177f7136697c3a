"""`mxgitops` and `mxgitops validate`: options, output, exit codes, error mapping."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from mxgitops import errors
from mxgitops.cli import CONVERT_TARGETS, ExitCode, exit_code_for, main
from mxgitops.commands import convert
from mxgitops.manifests import schema
from mxgitops.model import Dialect, FieldProblem, SpecError

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "jobs-repo-example"

LOCAL = """\
apiVersion: mxnet.mlkube.io/v1beta1
kind: MxJob
metadata:
  name: {name}
spec:
  replicaSpecs:
    - template:
        spec:
          containers: [{{name: mxnet, image: "mxnet:1.9"}}]
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs/train.yaml").write_text(LOCAL.format(name="train"))
    (tmp_path / "jobs/settings.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n")
    return tmp_path


# -- the group ----------------------------------------------------------------------------


def test_help_teaches_with_examples_and_exit_codes() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    assert "Examples:" in result.stdout
    assert "mxgitops validate jobs/" in result.stdout
    assert "5 another sync holds the lease" in result.stdout
    assert "--debug" in result.stdout
    validate_help = invoke("validate", "--help").stdout
    assert "FILE:LINE: job NAME: field.path: message" in validate_help
    assert "mxgitops validate --namespace ml-training -o json ." in validate_help


def test_version() -> None:
    """The installed version (read only for --version), as `mxgitops.__version__` says it."""
    from importlib.metadata import version

    import mxgitops

    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout == f"mxgitops, version {version('mxgitops')}\n"
    assert mxgitops.__version__ == version("mxgitops")


def test_convert_targets_are_converts_own() -> None:
    """cli names convert's targets so that it need not import convert to define --to."""
    assert tuple(convert.TARGETS) == CONVERT_TARGETS


def test_unknown_command_is_a_usage_error() -> None:
    result = invoke("frobnicate")
    assert result.exit_code == ExitCode.USAGE == 2


def test_exit_codes_are_the_documented_numbers() -> None:
    assert [(c.name, c.value) for c in ExitCode][:6] == [
        ("OK", 0),
        ("FAILED", 1),
        ("USAGE", 2),
        ("GIT", 3),
        ("CLUSTER", 4),
        ("LEASE_HELD", 5),
    ]


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (errors.ManifestError("bad"), ExitCode.FAILED),
        (SpecError([FieldProblem(("spec",), "x")]), ExitCode.FAILED),
        (errors.ConfigError("bad flag"), ExitCode.USAGE),
        (click.UsageError("no such option"), ExitCode.USAGE),
        (errors.GitError("fetch failed"), ExitCode.GIT),
        (errors.ClusterUnreachable("no route"), ExitCode.CLUSTER),
        (errors.ClusterForbidden("403"), ExitCode.CLUSTER),
        (errors.ClusterServerError("500", status=500), ExitCode.CLUSTER),
        (errors.LeaseHeldError("sync-abc"), ExitCode.LEASE_HELD),
        (RuntimeError("bug"), ExitCode.INTERNAL),
    ],
)
def test_exit_code_for(error: BaseException, code: ExitCode) -> None:
    assert exit_code_for(error) is code


@pytest.fixture
def failing() -> Iterator[None]:
    """A throwaway command that raises what it is told to."""

    @click.command("fail")
    @click.argument("kind")
    def fail(kind: str) -> None:
        raise {
            "config": errors.ConfigError("--path must be relative"),
            "git": errors.GitError("cannot fetch origin"),
            "lease": errors.LeaseHeldError("mxgitops-7f9c"),
            "bug": KeyError("oops"),
        }[kind]

    main.add_command(fail)
    yield
    main.commands.pop("fail")


@pytest.mark.usefixtures("failing")
@pytest.mark.parametrize(
    ("kind", "code", "message"),
    [
        ("config", 2, "Error: --path must be relative\n"),
        ("git", 3, "Error: cannot fetch origin\n"),
        ("lease", 5, "Error: another sync holds the lease: mxgitops-7f9c\n"),
        ("bug", 70, "Error: unexpected KeyError: 'oops' (run with --debug)\n"),
    ],
)
def test_errors_print_one_line_and_map_to_exit_codes(kind: str, code: int, message: str) -> None:
    result = invoke("fail", kind)
    assert result.exit_code == code
    assert result.stderr == message
    assert result.stdout == ""


@pytest.mark.usefixtures("failing")
def test_debug_prints_the_traceback() -> None:
    result = invoke("--debug", "fail", "git")
    assert result.exit_code == 3
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.endswith("Error: cannot fetch origin\n")


# -- validate ------------------------------------------------------------------------------


def test_validate_valid_tree(repo: Path) -> None:
    result = invoke("validate", str(repo))
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "jobs/settings.yaml:1: ignored ConfigMap: not an MxJob",
        "1 job valid, 0 invalid manifests, 0 problems, 1 document ignored",
    ]


def test_validate_defaults_to_the_current_directory(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    result = invoke("validate")
    assert result.exit_code == 0
    assert result.stdout.endswith(
        "1 job valid, 0 invalid manifests, 0 problems, 1 document ignored\n"
    )


def test_validate_reports_each_problem_on_one_line_and_exits_1(repo: Path) -> None:
    (repo / "jobs/bad.yaml").write_text(LOCAL.format(name="Bad_Name"))
    (repo / "jobs/broken.yaml").write_text("kind: [\n")
    result = invoke("validate", str(repo))
    assert result.exit_code == ExitCode.FAILED == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("jobs/bad.yaml:4: job Bad_Name: metadata.name: 'Bad_Name' is not")
    unclosed = "unclosed '[' at column 7: the file ends before its ']'"
    assert lines[1] == f"jobs/broken.yaml:1: invalid YAML: {unclosed}"
    assert lines[-1] == "1 job valid, 2 invalid manifests, 2 problems, 1 document ignored"


def test_validate_files_and_directories(
    repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    other = tmp_path_factory.mktemp("other") / "one.yml"
    other.write_text(LOCAL.format(name="one"))
    result = invoke("validate", str(repo / "jobs"), str(other))
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1].startswith("2 jobs valid")


def test_validate_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("validate", str(tmp_path / "nope"))
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_validate_json_report(repo: Path) -> None:
    (repo / "jobs/bad.yaml").write_text(LOCAL.format(name="bad").replace("name: mxnet", "name: x"))
    result = invoke("validate", "--output", "json", "--namespace", "ml", str(repo))
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert [(j["namespace"], j["name"], j["file"]) for j in report["jobs"]] == [
        ("ml", "train", "jobs/train.yaml")
    ]
    assert len(report["jobs"][0]["spec_hash"]) == 64
    assert report["problems"] == [
        {
            "file": "jobs/bad.yaml",
            "line": 9,
            "job": "bad",
            "field": "spec.replicaSpecs[0].template.spec.containers",
            "message": "every pod template needs a container named 'mxnet'",
        }
    ]
    assert report["ignored"] == [
        {"file": "jobs/settings.yaml", "line": 1, "api_version": "v1", "kind": "ConfigMap",
         "name": None}
    ]  # fmt: skip
    assert report["summary"] == "1 job valid, 1 invalid manifest, 1 problem, 1 document ignored"


@pytest.mark.parametrize("size", ["1KiB", "1024", "1kib"])
def test_validate_max_file_size(repo: Path, size: str) -> None:
    (repo / "jobs/big.yaml").write_text(LOCAL.format(name="big") + "#" * 2000 + "\n")
    result = invoke("validate", "--max-file-size", size, str(repo))
    assert result.exit_code == 1
    assert "jobs/big.yaml: file is 2.1 KiB, over the limit of 1 KiB" in result.stdout


@pytest.mark.parametrize("size", ["abc", "0", "1XB"])
def test_validate_bad_max_file_size_is_a_usage_error(repo: Path, size: str) -> None:
    result = invoke("validate", "--max-file-size", size, str(repo))
    assert result.exit_code == 2
    assert "is not a size" in result.stderr


def test_validate_the_example_jobs_repository() -> None:
    result = invoke("validate", "-o", "json", str(EXAMPLE))
    assert result.exit_code == 0, result.stdout
    report = json.loads(result.stdout)
    jobs = {j["name"]: j["file"] for j in report["jobs"]}
    assert jobs == {
        "bert-gpu": "jobs/nlp/bert-gpu.yaml",
        "cifar10-local": "jobs/vision/cifar10-local.yaml",
        "imagenet-dist": "jobs/vision/imagenet-dist.yaml",
    }


def test_validate_reads_and_compiles_only_the_schema_of_the_dialect_it_meets(
    repo: Path,
) -> None:
    """Each schema is a quarter of a megabyte: a seed manifest needs the seed's schema and
    its fast validator, not Kubeflow's, nor Python jsonschema's (that is for errors)."""
    for cached in (schema.schema, schema._fast, schema._detailed):
        cached.cache_clear()
    assert invoke("validate", str(repo / "jobs/train.yaml")).exit_code == 0
    assert [f.cache_info().currsize for f in (schema.schema, schema._fast)] == [1, 1]
    assert schema._detailed.cache_info().currsize == 0
    hits = schema.schema.cache_info().hits
    schema.schema(Dialect.SEED)
    assert schema.schema.cache_info().hits == hits + 1  # the one schema read: the seed's


def _installed_script() -> str:
    beside = Path(sys.executable).with_name("mxgitops")
    found = str(beside) if beside.exists() else shutil.which("mxgitops")
    assert found, "the mxgitops console script is not installed: pip install -e ."
    return found


def test_installed_script_runs_in_a_subprocess(tmp_path: Path) -> None:
    script = _installed_script()
    ok = subprocess.run(
        [script, "validate", str(EXAMPLE)], capture_output=True, text=True, timeout=60
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == "3 jobs valid, 0 invalid manifests, 0 problems, 0 documents ignored\n"
    (tmp_path / "bad.yaml").write_text("- not a manifest\n")
    bad = subprocess.run([script, "validate", str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode == 1
    assert bad.stdout.startswith("bad.yaml:1: a manifest must be a mapping")
    missing = subprocess.run(
        [script, "validate", str(tmp_path / "nope")], capture_output=True, text=True
    )
    assert missing.returncode == 2
    assert "Traceback" not in missing.stderr


def test_the_default_namespace_comes_from_the_repositorys_settings(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    (repo / ".mxgitops.yaml").write_text("namespace: ml-training\n")
    (repo / "jobs/twin.yaml").write_text(
        LOCAL.format(name="train").replace(
            "  name: train", "  name: train\n  namespace: ml-training"
        )
    )
    result = invoke("validate", "-o", "json")
    # Like a sync: both manifests are the job ml-training/train, defined twice.
    assert result.exit_code == ExitCode.FAILED
    assert "job ml-training/train is defined more than once" in result.stdout
    # The default policy allows the default namespace only: the operator allows both.
    allowing = repo / "policy.yaml"
    allowing.write_text("policy:\n  allowedNamespaces: [other, ml-training]\n")
    elsewhere = json.loads(
        invoke("validate", "-n", "other", "--policy-file", str(allowing), "-o", "json").stdout
    )
    assert {(j["namespace"], j["name"]) for j in elsewhere["jobs"]} == {
        ("other", "train"),
        ("ml-training", "train"),
    }
    (repo / ".mxgitops.yaml").write_text("namespace: [broken\n")
    broken = CliRunner().invoke(main, ["validate"])
    assert broken.exit_code == ExitCode.USAGE and ".mxgitops.yaml: not valid YAML" in broken.stderr


# -- .mxgitops.yaml's path, as sync reads it (issue 34) ----------------------------------


def test_validate_reads_where_the_repositorys_path_says(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no PATHS, validate reads `path:` of .mxgitops.yaml, as sync does, and names
    files from the repository's root; a path that does not exist fails as in sync."""
    (repo / "notes.yaml").write_text("kind: [\n")  # outside jobs/: sync never reads it
    (repo / ".mxgitops.yaml").write_text("path: jobs\n")
    monkeypatch.chdir(repo)
    result = invoke("validate")
    assert result.exit_code == 0, result.stdout
    assert result.stdout.splitlines() == [
        "jobs/settings.yaml:1: ignored ConfigMap: not an MxJob",
        "1 job valid, 0 invalid manifests, 0 problems, 1 document ignored",
    ]
    (repo / ".mxgitops.yaml").write_text("path: jobz\n")
    missing = CliRunner().invoke(main, ["validate"])
    assert missing.exit_code == ExitCode.USAGE
    assert missing.stderr == "Error: path 'jobz' does not exist in the jobs repository\n"


def json_keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in json_keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in json_keys(v)}
    return set()


def test_every_json_output_names_its_keys_one_way(repo: Path) -> None:
    """snake_case, as sync's, diff's, status's JSON and the note's (`spec_hash`,
    `policy_violations`): validate's too."""
    result = invoke("validate", "-o", "json", str(repo))
    keys = json_keys(json.loads(result.stdout))
    assert {"spec_hash", "api_version"} <= keys
    assert all(key == key.lower() for key in keys), keys
