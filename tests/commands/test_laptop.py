"""The laptop commands a new user meets first, without surprises (issue 47).

`convert` leaves a file already at the target version as it is, byte for byte, and
says so; it says when it drops a comment. `render` prints no YAML anchors or aliases
(a reviewer reads each object whole). `validate PATH` reads the `.mxgitops.yaml` of
the repository PATH is in, wherever it is run from.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from mxgitops.cli import main


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


V1 = """\
# the team's job
apiVersion: kubeflow.org/v1
kind: MXJob
metadata:
  name: cifar  # the name
spec:
  mxReplicaSpecs:
    Worker:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
            - name: mxnet
              image: "mxnet/python:1.9.1"
  runPolicy:   # written last, as the team likes it
    backoffLimit: 3
  jobMode: MXTrain
"""

SEED_WITH_A_DEFAULT_PORT = """\
apiVersion: mxnet.mlkube.io/v1beta1
kind: MxJob
metadata:
  name: seedy
spec:
  jobMode: local  # local mode
  replicaSpecs:
    - replicas: 1
      mxReplicaType: WORKER
      PsRootPort: 9091  # the port ps-lite listens on
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - name: mxnet
              image: mxnet/python:1.9.1
"""

DIST = """\
apiVersion: kubeflow.org/v1
kind: MXJob
metadata:
  name: cifar10-dist
spec:
  mxReplicaSpecs:
    Scheduler:
      replicas: 1
      template: &pod
        spec:
          containers:
            - name: mxnet
              image: mxnet/python:1.9.1_cpu_py3
              command: ["python3", "train_cifar10.py", "--kv-store", "dist_sync"]
              env: [{name: DATA, value: /data}]
    Server: {replicas: 2, template: *pod}
    Worker: {replicas: 3, template: *pod}
"""


# -- convert ----------------------------------------------------------------------------


@pytest.mark.parametrize("write", [False, True], ids=["print", "write"])
def test_convert_leaves_a_file_at_the_target_version_byte_identical(
    tmp_path: Path, write: bool
) -> None:
    file = tmp_path / "cifar.yaml"
    file.write_text(V1)
    result = run("convert", *(["-w"] if write else []), file)
    assert result.exit_code == 0, result.output
    if not write:
        assert result.stdout == V1
    assert file.read_text() == V1
    assert result.stderr.splitlines() == [
        f"{file}: job cifar: already kubeflow.org/v1, nothing changed"
    ]


def test_convert_says_when_it_drops_a_comment(tmp_path: Path) -> None:
    file = tmp_path / "seedy.yaml"
    file.write_text(SEED_WITH_A_DEFAULT_PORT)
    result = run("convert", file)
    assert result.exit_code == 0, result.output
    assert "# local mode" in result.stdout and "ps-lite" not in result.stdout
    assert result.stderr.splitlines() == [
        f"{file}: job seedy: mxnet.mlkube.io/v1beta1 -> kubeflow.org/v1",
        f"{file}:10: comment dropped (its field has no place in kubeflow.org/v1): "
        "# the port ps-lite listens on",
    ]


def test_convert_still_cleans_kubectl_output_at_the_target_version(tmp_path: Path) -> None:
    """A v1 job as `kubectl get -o yaml` prints it is not left as it is: its status
    and server-set metadata go, as for any other version."""
    file = tmp_path / "got.yaml"
    got = V1.replace("  name: cifar  # the name\n", "  name: cifar\n  uid: 1234\n")
    file.write_text(got + "status: {}\n")
    result = run("convert", file)
    assert result.exit_code == 0, result.output
    assert "uid" not in result.stdout and "status" not in result.stdout
    assert "nothing changed" not in result.stderr


# -- render -----------------------------------------------------------------------------


@pytest.mark.parametrize("runtime", ["batch", "jobset"])
def test_render_prints_no_anchors_or_aliases(tmp_path: Path, runtime: str) -> None:
    file = tmp_path / "dist.yaml"
    file.write_text(DIST)
    result = run("render", "--default-runtime", runtime, file)
    assert result.exit_code == 0, result.output
    events = list(yaml.parse(result.stdout, Loader=yaml.SafeLoader))
    anchored = [e for e in events if getattr(e, "anchor", None) is not None]
    assert anchored == []
    assert len(list(yaml.safe_load_all(result.stdout))) >= 1


# -- validate ---------------------------------------------------------------------------


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A jobs repository whose .mxgitops.yaml names its manifests' directory and default
    namespace, and a job there naming none; and a cwd outside it."""
    root = tmp_path / "jobs-repo"
    (root / "jobs").mkdir(parents=True)
    (root / ".mxgitops.yaml").write_text("path: jobs\nnamespace: ml\n")
    (root / "jobs" / "cifar.yaml").write_text(V1)
    (root / "notes.yaml").write_text("not: a job\n")  # outside `path`: not read
    return root


def namespaces(result: Result) -> dict[str, str]:
    report = json.loads(result.stdout)
    return {job["name"]: job["namespace"] for job in report["jobs"]}


def test_validate_path_reads_that_repositorys_settings(
    repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ".mxgitops.yaml").write_text("namespace: wrong\n")
    monkeypatch.chdir(elsewhere)

    whole = run("validate", "-o", "json", repository)
    one_file = run("validate", "-o", "json", repository / "jobs" / "cifar.yaml")

    assert whole.exit_code == 0, whole.output
    assert namespaces(whole) == {"cifar": "ml"}
    assert json.loads(whole.stdout)["ignored"] == []  # notes.yaml is not under `path`
    assert one_file.exit_code == 0, one_file.output
    assert namespaces(one_file) == {"cifar": "ml"}


def test_validate_path_applies_that_repositorys_policy(
    repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repository / ".mxgitops.yaml").write_text(
        textwrap.dedent(
            """\
            path: jobs
            policy:
              allowedImages: ["registry.example.com/ml/"]
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    result = run("validate", repository)
    assert result.exit_code == 1, result.output
    assert "policy:" in result.stdout and "mxnet/python:1.9.1" in result.stdout
