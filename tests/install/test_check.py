"""What `mxgitops check` (and so install's preflight) says before a first sync, beyond
tests/test_preflight.py: each problem of an invalid manifest (today's check said ok and
the first sync then failed), a cluster of a Kubernetes version the project does not test
(the API double answers v1.32.0; the real control plane v1.34, tested), and a local
checkout given as --repo, which a sync in the cluster cannot read (the URL to pass
instead is its remote's, without the credentials in it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from mxgitops.cli import ExitCode, main
from tests.gitrepos.fixtures import GitRemote, run_git

VALID = """\
apiVersion: kubeflow.org/v1
kind: MXJob
metadata: {name: good}
spec:
  mxReplicaSpecs:
    Worker:
      replicas: 1
      template: {spec: {containers: [{name: mxnet, image: mxnet/python:1.9.1}]}}
"""
INVALID = VALID.replace("name: good", "name: bad").replace("replicas: 1", "replicas: -1")


def check(*args: str, kubeapi: Any, tmp_path: Path) -> Result:
    flags = ["--kubeconfig", str(kubeapi.kubeconfig), "--cache-dir", str(tmp_path / "cache")]
    return CliRunner().invoke(main, ["check", *args, *flags])


def lines(result: Result, state: str) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith(f"{state}: ")]


def test_an_invalid_manifest_is_a_problem(
    tmp_path: Path, kubeapi: Any, make_git_remote: Any
) -> None:
    remote: GitRemote = make_git_remote("jobs", files={"a.yaml": VALID, "b.yaml": INVALID})
    result = check("--repo", remote.url, kubeapi=kubeapi, tmp_path=tmp_path)
    (line,) = [x for x in lines(result, "problem") if x.startswith("problem: manifests: ")]
    assert line.startswith("problem: manifests: b.yaml:")
    assert "job bad" in line and line.endswith("; mxgitops validate shows them all")
    assert result.exit_code == ExitCode.FAILED, result.output


def test_an_untested_kubernetes_version_is_a_warning(
    tmp_path: Path, kubeapi: Any, make_git_remote: Any
) -> None:
    remote: GitRemote = make_git_remote("jobs", files={"a.yaml": VALID})
    result = check("--repo", remote.url, kubeapi=kubeapi, tmp_path=tmp_path)
    warned = [x for x in lines(result, "warning") if x.startswith("warning: cluster: ")]
    if kubeapi.backend == "double":
        assert warned == [
            "warning: cluster: Kubernetes v1.32.0 is not a tested version (Kubernetes "
            "1.34): it may work; what differs is untested"
        ]
    else:
        assert warned == []


def test_a_local_checkout_is_told_to_pass_its_url(
    tmp_path: Path, kubeapi: Any, make_git_remote: Any
) -> None:
    remote: GitRemote = make_git_remote("jobs", files={"a.yaml": VALID})
    checkout = tmp_path / "checkout"
    run_git("clone", "-q", remote.url, str(checkout), cwd=tmp_path)
    public = "https://git.example.com/org/jobs.git"
    run_git("remote", "set-url", "origin", public.replace("://", "://me:s3cret@"), cwd=checkout)
    result = check("--repo", str(checkout), kubeapi=kubeapi, tmp_path=tmp_path)
    assert (
        f"warning: repository: {checkout} is a local work tree: a sync in the cluster cannot "
        f"read it; check and install the way the CronJob will fetch it: --repo {public}"
    ) in lines(result, "warning")
    assert "s3cret" not in result.output
