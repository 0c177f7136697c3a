"""Counts have bounds: a huge replica count is one readable problem, found before
any per-replica work (issue 13: `replicas: 1000000000000` hung validate and sync)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from mxgitops.manifests.loading import load
from mxgitops.manifests.spec import from_manifest
from mxgitops.model import MAX_REPLICAS, SpecError

HUGE = 1_000_000_000_000

DIST = """\
apiVersion: {api_version}
kind: {kind}
metadata:
  name: big
spec:
{body}
"""

SEED_BODY = """\
  replicaSpecs:
    - {{mxReplicaType: SCHEDULER, template: {{spec: {{containers: [{{name: mxnet, image: m}}]}}}}}}
    - {{mxReplicaType: SERVER, template: {{spec: {{containers: [{{name: mxnet, image: m}}]}}}}}}
    - mxReplicaType: WORKER
      replicas: {replicas}
      template: {{spec: {{containers: [{{name: mxnet, image: m}}]}}}}
"""

KUBEFLOW_BODY = """\
  mxReplicaSpecs:
    Scheduler: {{template: {{spec: {{containers: [{{name: mxnet, image: m}}]}}}}}}
    Server: {{template: {{spec: {{containers: [{{name: mxnet, image: m}}]}}}}}}
    Worker:
      replicas: {replicas}
      template: {{spec: {{containers: [{{name: mxnet, image: m}}]}}}}
"""

DIALECTS = {
    "seed": ("mxnet.mlkube.io/v1beta1", "MxJob", SEED_BODY),
    "kubeflow": ("kubeflow.org/v1", "MXJob", KUBEFLOW_BODY),
}


def manifest(dialect: str, replicas: int) -> str:
    api_version, kind, body = DIALECTS[dialect]
    return DIST.format(api_version=api_version, kind=kind, body=body.format(replicas=replicas))


@pytest.mark.timeout(10)
@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_a_huge_replica_count_is_one_problem_not_a_hang(tmp_path: Path, dialect: str) -> None:
    (tmp_path / "big.yaml").write_text(manifest(dialect, HUGE))
    result = load(tmp_path)
    assert [(p.job, p.field.rsplit(".", 1)[-1]) for p in result.problems] == [("big", "replicas")]
    assert f"at most {MAX_REPLICAS}" in result.problems[0].message
    assert result.invalid_keys == {("default", "big")}


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_the_largest_allowed_count_validates(tmp_path: Path, dialect: str) -> None:
    (tmp_path / "big.yaml").write_text(manifest(dialect, MAX_REPLICAS))
    result = load(tmp_path)
    assert result.ok, [str(p) for p in result.problems]


@pytest.mark.timeout(10)
def test_the_model_checks_the_bound_without_the_schema() -> None:
    """from_manifest is also called on documents that skipped the schema (tests, tools)."""
    import yaml

    doc: dict[str, Any] = yaml.safe_load(textwrap.dedent(manifest("kubeflow", HUGE)))
    with pytest.raises(SpecError) as caught:
        from_manifest(doc)
    (problem,) = caught.value.problems
    assert problem.field_path == "spec.mxReplicaSpecs.Worker.replicas"
    assert f"at most {MAX_REPLICAS}" in problem.message
