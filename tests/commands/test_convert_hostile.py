"""`convert` must not change what runs (issue 24): an aliased pod template is one YAML
node shared by several replicas, YAML 1.1 reads `010` as 8 where YAML 1.2 reads 10, an
alias bomb must meet validate's bounds, and every result is proved by reading it back
as validate does: the same objects, or nothing is written."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest
import yaml

from mxgitops.commands import convert, convertcheck
from mxgitops.errors import ManifestError
from mxgitops.manifests.loading import load
from mxgitops.model import Dialect, ReplicaType, RestartPolicy

SEED_ALIASED = """\
apiVersion: mxnet.mlkube.io/v1beta1
kind: MxJob
metadata:
  name: seeded
spec:
  jobMode: dist
  replicaSpecs:
    - mxReplicaType: SCHEDULER
      PsRootPort: 2222
      template: &tpl
        spec:
          containers:
            - name: mxnet
              image: mxnet:1.9
    - mxReplicaType: SERVER
      replicas: 1
      template: *tpl
    - mxReplicaType: WORKER
      replicas: 2
      template: *tpl
"""

KUBEFLOW_ALIASED = """\
apiVersion: kubeflow.org/v1
kind: MXJob
metadata:
  name: flowed
spec:
  jobMode: MXTrain
  mxReplicaSpecs:
    Scheduler:
      replicas: 1
      restartPolicy: Never
      template: &tpl
        spec:
          containers:
            - name: mxnet
              image: mxnet:1.9
    Server:
      replicas: 1
      restartPolicy: Never
      template: *tpl
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template: *tpl
"""


def read_back(tmp_path: Path, text: str, name: str = "job.yaml") -> object:
    (tmp_path / name).write_text(text)
    result = load(tmp_path / name)
    assert result.ok, [str(p) for p in result.problems]
    (job,) = result.jobs
    return job


def test_an_aliased_template_is_converted_for_each_replica_alone(tmp_path: Path) -> None:
    converted = convert.convert_text(SEED_ALIASED, Dialect.KUBEFLOW)
    job = read_back(tmp_path, converted.text)
    ports = {r.type: r.ps_root_port for r in job.replica_specs}  # type: ignore[attr-defined]
    assert ports[ReplicaType.SCHEDULER] == 2222, converted.text
    original = read_back(tmp_path, SEED_ALIASED, "original.yaml")
    assert job.spec_hash == original.spec_hash or not converted.jobs[0].same_spec  # type: ignore[attr-defined]

    back = convert.convert_text(KUBEFLOW_ALIASED, Dialect.SEED)
    seed = read_back(tmp_path, back.text, "seed.yaml")
    policies = {r.type: r.restart_policy for r in seed.replica_specs}  # type: ignore[attr-defined]
    assert policies == {
        ReplicaType.SCHEDULER: RestartPolicy.NEVER,
        ReplicaType.SERVER: RestartPolicy.NEVER,
        ReplicaType.WORKER: RestartPolicy.ON_FAILURE,
    }, back.text


def test_convert_reads_yaml_as_validate_and_sync_do(tmp_path: Path) -> None:
    """YAML 1.1: `010` is octal, 8 workers to validate and sync."""
    text = textwrap.dedent("""\
        apiVersion: kubeflow.org/v1
        kind: MXJob
        metadata:
          name: octal
        spec:
          jobMode: MXTrain
          mxReplicaSpecs:
            Scheduler:
              replicas: 1
              template: {spec: {containers: [{name: mxnet, image: "mxnet:1.9"}]}}
            Server:
              replicas: 1
              template: {spec: {containers: [{name: mxnet, image: "mxnet:1.9"}]}}
            Worker:
              replicas: 010
              template: {spec: {containers: [{name: mxnet, image: "mxnet:1.9"}]}}
    """)
    original = read_back(tmp_path, text, "original.yaml")
    workers = {r.type: r.replicas for r in original.replica_specs}  # type: ignore[attr-defined]
    assert workers[ReplicaType.WORKER] == 8
    for target in (Dialect.KUBEFLOW, Dialect.SEED):
        converted = convert.convert_text(text, target)
        job = read_back(tmp_path, converted.text, f"{target.name}.yaml")
        counts = {r.type: r.replicas for r in job.replica_specs}  # type: ignore[attr-defined]
        assert counts[ReplicaType.WORKER] == 8, converted.text


def bomb(levels: int) -> str:
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(1, levels):
        refs = ",".join([f"*l{n - 1}"] * 9)
        lines.append(f"l{n}: &l{n} [{refs}]")
    body = "\n".join(f"    {line}" for line in lines)
    return (
        "apiVersion: kubeflow.org/v1\nkind: MXJob\nmetadata:\n  name: bomb\n"
        f"  annotations:\n    x: y\nspec:\n  jobMode: MXTrain\n  bomb:\n{body}\n"
    )


@pytest.mark.timeout(30)
def test_an_alias_bomb_is_refused_within_validates_bounds(tmp_path: Path) -> None:
    """Six levels (half a million values) here, so that today's code only takes a while."""
    text = bomb(6)
    (tmp_path / "bomb.yaml").write_text(text)
    said = [p.message for p in load(tmp_path / "bomb.yaml").problems]
    assert any("refusing to read it" in m for m in said), said
    started = time.monotonic()
    with pytest.raises(ManifestError, match="refusing to read it"):
        convert.convert_text(text, Dialect.KUBEFLOW, name="bomb.yaml")
    assert time.monotonic() - started < 5


def test_a_result_that_reads_back_otherwise_is_never_written(tmp_path: Path) -> None:
    """The proof itself: the converted text, read as validate reads it, must render the
    objects the original renders; here a text that does not (one worker more)."""
    original = KUBEFLOW_ALIASED
    wrong = yaml.safe_dump(
        {
            **yaml.safe_load(original),
            "spec": {
                **yaml.safe_load(original)["spec"],
                "mxReplicaSpecs": {
                    **yaml.safe_load(original)["spec"]["mxReplicaSpecs"],
                    "Worker": {
                        **yaml.safe_load(original)["spec"]["mxReplicaSpecs"]["Worker"],
                        "replicas": 3,
                    },
                },
            },
        }
    )
    with pytest.raises(ManifestError, match=r"job flowed: the converted manifest would run .*"):
        convertcheck.prove(original, wrong, name="flowed.yaml")
    convertcheck.prove(original, convert.convert_text(original, Dialect.KUBEFLOW).text, name="x")


def test_convert_w_does_not_write_through_a_symlink_out_of_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pull request adds `jobs/a.yaml -> ../../../home/you/.kube/old-job.yaml`; whoever
    runs `convert -w jobs/*.yaml` in the checkout would rewrite a file outside it.
    Nothing is written, the files inside included (all or nothing)."""
    checkout, outside = tmp_path / "checkout", tmp_path / "elsewhere"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "jobs").mkdir()
    outside.mkdir()
    (outside / "old.yaml").write_text(SEED_ALIASED)
    (checkout / "jobs" / "b.yaml").write_text(SEED_ALIASED)
    (checkout / "jobs" / "a.yaml").symlink_to(outside / "old.yaml")
    (checkout / "jobs" / "c.yaml").symlink_to(Path("b.yaml"))  # inside: written through
    monkeypatch.chdir(checkout)
    files = [Path("jobs/a.yaml"), Path("jobs/b.yaml")]
    with pytest.raises(ManifestError, match=r"jobs/a\.yaml: a symlink to .*elsewhere/old\.yaml"):
        convert.write(convert.convert_files(files, Dialect.KUBEFLOW))
    assert (outside / "old.yaml").read_text() == SEED_ALIASED
    assert (checkout / "jobs" / "b.yaml").read_text() == SEED_ALIASED
    convert.write(convert.convert_files([Path("jobs/c.yaml")], Dialect.KUBEFLOW))
    assert (checkout / "jobs" / "b.yaml").read_text() != SEED_ALIASED
    assert (checkout / "jobs" / "c.yaml").is_symlink()
