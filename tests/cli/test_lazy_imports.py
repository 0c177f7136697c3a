"""Commands that need no cluster never load the Kubernetes client, nor GitPython
when they read a plain directory: importing either costs a good part of a second,
more than validating a file. `validate` of one file (issue 14: under 0.3 s of
process wall) loads none of what only other commands need either: the YAML
round-tripper of `convert`, rich's progress display, the report and review
renderers, the sync, nor importlib.metadata for a version nobody asked for.
Each command runs in a fresh interpreter, which then reports what it imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "jobs-repo-example" / "jobs" / "vision"
HEAVY = ("kubernetes", "git", "jsonschema", "urllib3")
# What only other commands (or --version) need: importing them all cost validate ~150 ms.
NOT_FOR_VALIDATE = (
    "ruamel",  # convert's round-trip YAML
    "rich",  # sync's progress display
    "importlib.metadata",  # --version (it imports email.*, ~40 ms)
    "mxgitops.commands.convert",
    "mxgitops.cli.console",
    "mxgitops.commands.status",
    "mxgitops.outputs.report",
    "mxgitops.commands.review",
    "mxgitops.commands.sync",
    "mxgitops.state.apply",
    "mxgitops.source.repository",
    "mxgitops.manifests.loadcache",
    "http.client",  # urllib3's (it imports email.*, ~40 ms)
    "httptools",  # the transport's HTTP parser
    "ssl",  # the transport's TLS (~10 ms)
)

# Runs the CLI in-process, then prints its exit code and every module it imported.
_PROBE = """
import json, sys
from mxgitops.cli import main
code = 0
try:
    main(sys.argv[1:], prog_name="mxgitops")
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "loaded": sorted(sys.modules)}))
"""


def run(*args: str, home: Path) -> tuple[int, list[str], str]:
    """Exit code, which of HEAVY were imported, and what the command printed."""
    code, loaded, printed = run_all(*args, home=home)
    return code, [m for m in loaded if m in HEAVY], printed


def run_all(*args: str, home: Path) -> tuple[int, list[str], str]:
    """Exit code, every module imported (submodules too), and what the command printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "MXGITOPS_"))}
    env["HOME"] = str(home)  # no ~/.kube/config: no cluster configured
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        check=False,
        timeout=60,
    )
    last = json.loads(done.stdout.strip().splitlines()[-1])
    return last["code"], last["loaded"], done.stdout + done.stderr


def among(loaded: list[str], packages: tuple[str, ...]) -> list[str]:
    """The packages of `packages` that were imported, or a module of theirs."""
    return [p for p in packages if any(m == p or m.startswith(p + ".") for m in loaded)]


@pytest.fixture
def jobs(tmp_path: Path) -> Path:
    """A plain directory (no Git) of valid manifests."""
    return Path(shutil.copytree(EXAMPLE, tmp_path / "jobs"))


def test_validate_of_a_plain_directory_loads_neither_kubernetes_nor_git(jobs: Path) -> None:
    code, loaded, printed = run("validate", str(jobs), home=jobs.parent)
    assert code == 0 and "2 jobs valid, 0 invalid" in printed
    assert not {"kubernetes", "git"} & set(loaded), loaded


def test_validate_of_one_valid_file_loads_no_client_nor_python_jsonschema(jobs: Path) -> None:
    """jsonschema-rs says valid; Python jsonschema only words the errors of invalid ones."""
    code, loaded, printed = run("validate", str(jobs / "cifar10-local.yaml"), home=jobs.parent)
    assert code == 0 and "1 job valid, 0 invalid" in printed
    assert loaded == [], loaded


def test_validate_of_one_file_loads_only_what_validating_needs(jobs: Path) -> None:
    code, loaded, printed = run_all("validate", str(jobs / "cifar10-local.yaml"), home=jobs.parent)
    assert code == 0 and "1 job valid, 0 invalid" in printed
    assert among(loaded, NOT_FOR_VALIDATE) == [], among(loaded, NOT_FOR_VALIDATE)


def test_version_still_reads_the_installed_version(jobs: Path) -> None:
    from importlib.metadata import version

    code, loaded, printed = run_all("--version", home=jobs.parent)
    assert code == 0 and f"mxgitops, version {version('mxgitops')}" in printed
    assert "importlib.metadata" in loaded  # read when asked for, and only then


def test_the_commands_that_need_them_still_get_them(jobs: Path) -> None:
    """The lazy imports happen: a dry-run sync renders its plan, convert round-trips YAML."""
    code, loaded, printed = run_all("sync", "--dry-run", "--repo", str(jobs), home=jobs.parent)
    assert code == 0 and "2 to create" in printed
    assert among(
        loaded,
        ("mxgitops.commands.sync", "mxgitops.outputs.report", "mxgitops.cli.console"),
    ) == [
        "mxgitops.commands.sync",
        "mxgitops.outputs.report",
        "mxgitops.cli.console",
    ]
    code, loaded, printed = run_all("convert", str(jobs / "cifar10-local.yaml"), home=jobs.parent)
    assert code == 0 and "apiVersion: kubeflow.org/v1" in printed
    assert among(loaded, ("ruamel", "mxgitops.commands.convert")) == [
        "ruamel",
        "mxgitops.commands.convert",
    ]


def test_an_invalid_manifest_still_gets_jsonschemas_readable_message(jobs: Path) -> None:
    bad = jobs / "cifar10-local.yaml"
    bad.write_text(bad.read_text().replace("jobMode: local", "jobMod: local", 1))
    code, loaded, printed = run("validate", str(bad), home=jobs.parent)
    assert code == 1
    assert loaded == ["jsonschema"], loaded
    assert 'unknown field "jobMod"; did you mean "jobMode"?' in printed


def test_a_dry_run_without_a_cluster_never_loads_the_kubernetes_client(jobs: Path) -> None:
    code, loaded, printed = run("sync", "--dry-run", "--repo", str(jobs), home=jobs.parent)
    assert code == 0 and "2 to create" in printed
    assert "kubernetes" not in loaded and "git" not in loaded, loaded


def test_a_sync_with_a_cluster_still_loads_it(jobs: Path) -> None:
    """The probe sees an import when there is one: a kubeconfig pointing nowhere makes
    the sync connect (and fail, exit 4), which needs the client."""
    kubeconfig = jobs.parent / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n"
    )
    code, loaded, printed = run(
        "sync",
        "--dry-run",
        "--repo",
        str(jobs),
        "--kubeconfig",
        str(kubeconfig),
        "--request-timeout",
        "2",
        home=jobs.parent,
    )
    assert code == 4 and "connection refused" in printed
    assert "kubernetes" in loaded
