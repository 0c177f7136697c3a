"""`mxgitops install --export` (mxgitops/install/export.py): only YAML on stdout, the
manifests install would apply without any Secret, each Secret they read named with the
kubectl command that creates it, nothing read from the Secrets' files and nothing sent
to the cluster (the API double's request log stays empty). The same output passes
`kubectl apply --dry-run=server` on the real control plane."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from mxgitops.cli import ExitCode, main
from mxgitops.install.overlay import Installation
from mxgitops.install.render import render
from tests.controlplane.harness import RealCluster

REPO = "https://git.example.com/org/jobs.git"
TOKEN = "gitea-token-0123456789abcdef"
WEBHOOK = "webhook-secret-fedcba9876543210"


def export(tmp_path: Path, *args: str) -> tuple[int, str]:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    webhook = tmp_path / "webhook"
    webhook.write_text(WEBHOOK)
    flags = ["--repo", REPO, "--token-file", str(token), "--receiver"]
    flags += ["--webhook-secret-file", str(webhook), "--image", "registry.example.com/m:1"]
    result = CliRunner().invoke(main, ["install", "--export", *flags, *args])
    return result.exit_code, result.stdout


def test_the_export_is_only_yaml_and_holds_no_secret(tmp_path: Path) -> None:
    code, out = export(tmp_path)
    assert code == ExitCode.OK
    documents = list(yaml.safe_load_all(out))
    assert all(isinstance(d, dict) and d["apiVersion"] and d["kind"] for d in documents)
    assert "Secret" not in {d["kind"] for d in documents}
    assert TOKEN not in out and WEBHOOK not in out
    installation = Installation(
        repo=REPO, image="registry.example.com/m:1", receiver=True, token_file=Path("t")
    )
    assert documents == render(installation)


def test_the_export_names_each_secret_and_the_command_that_makes_it(tmp_path: Path) -> None:
    _, out = export(tmp_path, "--namespace", "ml-gitops")
    comments = [line for line in out.splitlines() if line.startswith("#")]
    assert comments == [
        "# mxgitops: the Secrets these manifests read, which you create:",
        "#   kubectl -n ml-gitops create secret generic mxgitops-git --from-file=token=FILE",
        "#   kubectl -n ml-gitops create secret generic mxgitops-webhook --from-file=secret=FILE",
    ]


def test_the_export_sends_nothing_to_the_cluster(tmp_path: Path, kubeapi: Any) -> None:
    code, _ = export(tmp_path, "--kubeconfig", str(kubeapi.kubeconfig))
    assert code == ExitCode.OK
    assert kubeapi.request_log == []


def test_the_export_passes_the_servers_dry_run(control_plane: RealCluster, tmp_path: Path) -> None:
    _, out = export(tmp_path, "--namespace", "mxgitops-export", "--queues")
    control_plane.ensure_namespace("mxgitops-export")
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={control_plane.kubeconfig}", "apply", "--dry-run=server",
         "-f", "-"],
        input=out, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "cronjob.batch/mxgitops created (server dry run)" in done.stdout
    cronjobs = control_plane.rest.get("/apis/batch/v1/namespaces/mxgitops-export/cronjobs")
    assert cronjobs["items"] == []
