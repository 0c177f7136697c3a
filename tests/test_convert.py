"""`mxgitops convert`: any version in, kubeflow.org/v1 (or the seed dialect) out,
the same job, comments kept."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mxgitops.cli import main
from mxgitops.convert import convert_text
from mxgitops.errors import ManifestError
from mxgitops.manifests import load
from mxgitops.spec import Dialect

CORPUS = Path(__file__).parent / "data" / "published"
UPSTREAM = Path(__file__).resolve().parents[2] / "shared" / "examples" / "upstream"
VALID = [p for p in sorted(CORPUS.glob("*.yaml")) if "# expect: valid" in p.read_text()]

COMMENTED = """\
# the team's note on this job
apiVersion: kubeflow.org/v1alpha2  # the old one
kind: MXJob
metadata:
  name: commented  # keep me
spec:
  cleanPodPolicy: All
  mxReplicaSpecs:
    Worker:
      replicas: 1
      template:
        spec:
          containers:
            - name: mxnet
              image: mxnet:1.9  # pinned on purpose
---
apiVersion: v1
kind: ConfigMap  # not a job: left alone
metadata: {name: settings}
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def job_of(root: Path, name: str, text: str) -> tuple[str, list[str]]:
    (root / name).write_text(text)
    result = load(root / name)
    assert result.ok, [str(p) for p in result.problems]
    (job,) = result.jobs
    return job.spec_hash, [w.field for w in result.warnings]


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_every_valid_published_shape_converts_to_v1_as_the_same_job(
    tmp_path: Path, path: Path
) -> None:
    original = path.read_text()
    before, _ = job_of(tmp_path, "before.yaml", original)
    converted = convert_text(original, Dialect.KUBEFLOW)
    after, warnings = job_of(tmp_path, "after.yaml", converted.text)
    assert "apiVersion" not in warnings  # the current version: no note to migrate
    assert converted.text.startswith("# origin:")  # the header comment survives
    (job,) = converted.jobs
    assert job.same_spec is (after == before)
    if "PsRootPort" not in original:  # a scheduler port moves into the template
        assert after == before


@pytest.mark.parametrize("name", ["mlkube-v1beta1-dist.yaml", "mlkube-v1beta1-local.yaml"])
def test_the_seed_examples_go_to_kubeflow_and_back_unchanged(tmp_path: Path, name: str) -> None:
    original = (UPSTREAM / name).read_text()
    before, _ = job_of(tmp_path, "a.yaml", original)
    there = convert_text(original, Dialect.KUBEFLOW).text
    back = convert_text(there, Dialect.SEED).text
    assert job_of(tmp_path, "b.yaml", there)[0] == before
    assert job_of(tmp_path, "c.yaml", back)[0] == before


def test_comments_and_other_documents_are_kept() -> None:
    text = convert_text(COMMENTED, Dialect.KUBEFLOW).text
    assert text.startswith("# the team's note on this job\napiVersion: kubeflow.org/v1")
    assert "name: commented  # keep me" in text
    assert "image: mxnet:1.9  # pinned on purpose" in text
    assert "kind: ConfigMap  # not a job: left alone" in text
    assert "  runPolicy:\n    cleanPodPolicy: All\n" in text


def test_kubectl_get_output_is_cleaned(tmp_path: Path) -> None:
    dump = (CORPUS / "kubeflow-v1-kubectl-get.yaml").read_text()
    text = convert_text(dump, Dialect.KUBEFLOW).text
    for field in ("status:", "uid:", "resourceVersion:", "creationTimestamp:", "generation:"):
        assert field not in text
    job_of(tmp_path, "clean.yaml", text)


def test_a_moved_scheduler_port_is_reported_as_a_changed_spec() -> None:
    converted = convert_text((CORPUS / "seed-v1beta1-dist.yaml").read_text(), Dialect.KUBEFLOW)
    assert "- containerPort: 9092\n" in converted.text or "containerPort: 9092" in converted.text
    (job,) = converted.jobs
    assert job.same_spec is False
    assert "a sync replaces this job once" in converted.describe(Dialect.KUBEFLOW)[0]


def test_what_the_seed_dialect_cannot_express_is_refused() -> None:
    with pytest.raises(ManifestError, match="a run policy, which the seed dialect cannot express"):
        convert_text(COMMENTED, Dialect.SEED, name="job.yaml")


def test_an_invalid_manifest_is_not_converted() -> None:
    with pytest.raises(ManifestError, match="job commented is invalid, fix it first"):
        convert_text(COMMENTED.replace("replicas: 1", "replicas: 0"), Dialect.KUBEFLOW)


def test_cli_prints_or_writes_and_lists_jobs_on_stderr(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(COMMENTED)
    printed = invoke("convert", str(path))
    assert printed.exit_code == 0
    assert "apiVersion: kubeflow.org/v1        # the old one\n" in printed.stdout
    assert printed.stderr == f"{path}: job commented: kubeflow.org/v1alpha2 -> kubeflow.org/v1\n"
    assert path.read_text() == COMMENTED
    assert invoke("convert", "-w", str(path)).exit_code == 0
    assert path.read_text() == printed.stdout


def test_cli_writes_nothing_when_one_file_fails(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(COMMENTED)
    bad.write_text(textwrap.dedent(COMMENTED).replace("replicas: 1", "replicas: 0"))
    result = invoke("convert", "-w", str(good), str(bad))
    assert result.exit_code == 1
    assert "bad.yaml: job commented is invalid" in result.stderr
    assert good.read_text() == COMMENTED
