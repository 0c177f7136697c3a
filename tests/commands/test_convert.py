"""`mxgitops convert`: any version in, kubeflow.org/v1 (or the seed dialect) out,
the same job, comments kept."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from mxgitops.cli import main
from mxgitops.commands.convert import convert_text
from mxgitops.errors import ManifestError
from mxgitops.manifests.loading import load
from mxgitops.model import Dialect
from tests.helpers import corpus
from tests.helpers.corpus import Corpus, Shape

CORPUS = Path(__file__).parents[1] / "data" / "published"
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


@pytest.mark.parametrize("shape", [Shape.SEED_DIST, Shape.SEED_LOCAL], ids=["dist", "local"])
@pytest.mark.parametrize("examples", corpus.params())
def test_the_seed_examples_go_to_kubeflow_and_back_unchanged(
    tmp_path: Path, examples: Corpus, shape: Shape
) -> None:
    original = examples.path(shape).read_text()
    assert "PsRootPort" in original or shape is Shape.SEED_LOCAL  # the port is kept as said
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


# Comments on the spec outside the pod templates, in each version's own places: the
# spec's keys, the run policy (inline or nested, older spellings), each replica spec
# and its fields, the template key and inside the template. `{...}` marks where
# each version differs.
_POD = """\
        spec:
          containers:
            - name: mxnet
              image: mxnet:1.9  # pinned {type}
"""
MAP_FORM = """\
apiVersion: {api_version}
kind: MXJob
metadata:
  name: commented
spec:  # the spec
  # what kind of job
  jobMode: MXTrain  # training
{run_policy}  # the replicas
  mxReplicaSpecs:  # three kinds
{replicas}  # the end of the spec
"""
MAP_REPLICA = """\
    # one {type} set
    {type}:  # the {type}
      replicas: 1  # {type} count
      restartPolicy: Never  # {type} restarts
      # the {type} pod
      template:  # {type} template
""" + _POD.replace("        ", "        ", 1)
LIST_FORM = """\
apiVersion: {api_version}
kind: {kind}
metadata:
  name: commented
spec:  # the spec
  # what kind of job
  jobMode: dist  # training
{run_policy}  # the replicas
  replicaSpecs:  # three kinds
{replicas}  # the end of the spec
"""
LIST_REPLICA = (
    """\
    # one {type} set
    - mxReplicaType: {TYPE}  # the {type}
      replicas: 1  # {type} count
      # the {type} pod
      template:  # {type} template
"""
    + _POD
)
INLINE_RUN_POLICY = """\
  # cleaning up
  {clean}: Running  # keep running pods
  {ttl}: 60  # a minute
"""
NESTED_RUN_POLICY = """\
  # how it runs
  runPolicy:  # the run policy
    # cleaning up
    cleanPodPolicy: Running  # keep running pods
    ttlSecondsAfterFinished: 60  # a minute
"""
TYPES = ("Scheduler", "Server", "Worker")


def commented(api_version: str, run_policy: str = "") -> str:
    if api_version in ("kubeflow.org/v1alpha1", "mlkube.io/v1beta1", "mxnet.mlkube.io/v1beta1"):
        kind = "MXJob" if api_version.startswith("kubeflow") else "MxJob"
        replicas = "".join(LIST_REPLICA.format(type=t, TYPE=t.upper()) for t in TYPES)
        form = LIST_FORM.replace("{kind}", kind)
    else:
        replicas = "".join(MAP_REPLICA.format(type=t) for t in TYPES)
        form = MAP_FORM
    text = form.replace("{replicas}", replicas).replace("{run_policy}", run_policy)
    if api_version == "kubeflow.org/v1alpha2":  # no jobMode in that version
        text = text.replace("  # what kind of job\n  jobMode: MXTrain  # training\n", "")
    return text.replace("{api_version}", api_version)


COMMENTED_VERSIONS = {
    "kubeflow.org/v1alpha2": INLINE_RUN_POLICY.format(
        clean="cleanPodPolicy", ttl="ttlSecondsAfterFinishing"
    ),
    "kubeflow.org/v1beta1": INLINE_RUN_POLICY.format(
        clean="cleanPodPolicy", ttl="ttlSecondsAfterFinished"
    ),
    "kubeflow.org/v1": NESTED_RUN_POLICY,
    "kubeflow.org/v1alpha1": "  # cleaning up\n  cleanupPodPolicy: Running  # keep running pods\n",
    "mlkube.io/v1beta1": "",
}


def comment_at(text: str, comment: str, field: str) -> None:
    """`comment` ends the line of `field`, or (a whole line) stands just above it."""
    lines = text.splitlines()
    found = [i for i, line in enumerate(lines) if line.rstrip().endswith(comment)]
    assert len(found) == 1, f"{comment!r} {len(found)} times in:\n{text}"
    (at,) = found
    line = lines[at].strip()
    if line.startswith("#"):
        assert lines[at + 1].strip().startswith(field), f"{comment!r} not above {field!r}:\n{text}"
    else:
        assert line.startswith(field), f"{comment!r} not at {field!r}:\n{text}"


def expected_comments(source: str, target: Dialect, run_policy: str) -> list[tuple[str, str]]:
    """(comment, the converted field it belongs to) for a `commented()` manifest."""
    pairs = [
        ("# the replicas", "mxReplicaSpecs:" if target is Dialect.KUBEFLOW else "replicaSpecs:"),
        ("# three kinds", "mxReplicaSpecs:" if target is Dialect.KUBEFLOW else "replicaSpecs:"),
    ]
    if source != "kubeflow.org/v1alpha2":
        pairs += [("# what kind of job", "jobMode:"), ("# training", "jobMode:")]
    if "cleanPodPolicy" in run_policy or "cleanupPodPolicy" in run_policy:
        pairs += [("# cleaning up", "cleanPodPolicy:"), ("# keep running pods", "cleanPodPolicy:")]
    if "ttl" in run_policy:
        pairs += [("# a minute", "ttlSecondsAfterFinished: 60")]
    if "runPolicy" in run_policy:
        pairs += [("# how it runs", "runPolicy:"), ("# the run policy", "runPolicy:")]
    for t in TYPES:
        key = f"{t}:" if target is Dialect.KUBEFLOW else f"- mxReplicaType: {t.upper()}"
        pairs += [
            (f"# one {t} set", key),
            (f"# the {t}", key),
            (f"# {t} count", "replicas: 1"),
            (f"# the {t} pod", "template:"),
            (f"# {t} template", "template:"),
            (f"# pinned {t}", "image: mxnet:1.9"),
        ]
        if "mxReplicaSpecs" in commented(source):  # to the seed: into the template
            pairs += [(f"# {t} restarts", "restartPolicy: Never")]
    return pairs


@pytest.mark.parametrize("source", COMMENTED_VERSIONS, ids=lambda v: v.replace("/", "-"))
def test_comments_in_the_spec_stay_at_their_converted_fields(tmp_path: Path, source: str) -> None:
    original = commented(source, COMMENTED_VERSIONS[source])
    before, _ = job_of(tmp_path, "before.yaml", original)
    text = convert_text(original, Dialect.KUBEFLOW).text
    assert job_of(tmp_path, "after.yaml", text)[0] == before
    assert text.startswith("apiVersion: kubeflow.org/v1\n")
    assert "spec:  # the spec\n" in text
    for comment, field in expected_comments(source, Dialect.KUBEFLOW, COMMENTED_VERSIONS[source]):
        comment_at(text, comment, field)
    assert text.endswith("  # the end of the spec\n")


@pytest.mark.parametrize(
    "source",
    ["kubeflow.org/v1", "kubeflow.org/v1alpha1", "mlkube.io/v1beta1"],
    ids=lambda v: v.replace("/", "-"),
)
def test_comments_in_the_spec_stay_when_converting_to_the_seed(tmp_path: Path, source: str) -> None:
    original = commented(source)  # no run policy: the seed dialect has none
    text = convert_text(original, Dialect.SEED).text
    job_of(tmp_path, "after.yaml", text)
    assert "spec:  # the spec\n" in text
    for comment, field in expected_comments(source, Dialect.SEED, ""):
        comment_at(text, comment, field)
    assert text.endswith("  # the end of the spec\n")


FLOWING = """\
apiVersion: kubeflow.org/v1beta1
kind: MXJob
metadata:
  name: flowing
spec:
  jobMode: MXTrain
  # what follows
  mxReplicaSpecs:
    Scheduler:
      replicas: 1
      template: &pod
        spec:
          containers:
            - name: mxnet
              image: "mxnet:1.9"
              args: ["a", "b"]  # flow args
              # the command
              command:
                - python  # the interpreter
                # the script
                - train.py
    Server:
      template: *pod
      # about restarts
      restartPolicy: OnFailure
    Worker:
      replicas: 2  # two
      template: {spec: {containers: [{name: mxnet, image: "mxnet:1.9"}]}}  # flow
      # the last
"""


def test_comments_in_flow_nodes_lists_and_aliases_are_written_once(tmp_path: Path) -> None:
    text = convert_text(FLOWING, Dialect.KUBEFLOW).text
    job_of(tmp_path, "after.yaml", text)
    for comment, field in [
        ("# what follows", "mxReplicaSpecs:"),
        ("# flow args", "args:"),
        ("# the command", "command:"),
        ("# the interpreter", "- python"),
        ("# the script", "- train.py"),
        ("# about restarts", "restartPolicy: OnFailure"),
        ("# two", "replicas: 2"),
        ("# flow", "template: {spec:"),
    ]:
        comment_at(text, comment, field)
    assert "template: *pod\n" in text
    assert text.endswith("\n      # the last\n")


SEED_JOB = """\
# yaml-language-server: $schema=../../schemas/mxjob-seed-v1beta1.json
apiVersion: mxnet.mlkube.io/v1beta1
kind: MxJob
metadata:
  name: seeded
spec:
  jobMode: local
  replicaSpecs:
    - mxReplicaType: WORKER
      replicas: 1
      template:
        spec:
          containers:
            - name: mxnet
              image: mxnet:1.9
"""


def test_convert_w_points_the_editors_schema_comment_at_the_new_dialect(tmp_path: Path) -> None:
    """The editor's modeline named the old dialect's schema: it now names the target's,
    in the same directory, and stderr says so."""
    path = tmp_path / "jobs" / "seeded.yaml"
    path.parent.mkdir()
    path.write_text(SEED_JOB)
    result = CliRunner().invoke(main, ["convert", "-w", str(path)])
    assert result.exit_code == 0, result.output
    first = path.read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=../../schemas/mxjob-kubeflow-v1.json"
    assert "schema comment now names mxjob-kubeflow-v1.json" in result.stderr
    back = CliRunner().invoke(main, ["convert", "--to", "seed", str(path)])
    assert back.stdout.splitlines()[0].endswith("$schema=../../schemas/mxjob-seed-v1beta1.json")


def test_convert_drops_a_schema_comment_it_cannot_point_at_the_new_dialect() -> None:
    other = "# yaml-language-server: $schema=https://example.com/mxjob-v1beta1.json\n"
    converted = convert_text(other + SEED_JOB.split("\n", 1)[1], Dialect.KUBEFLOW)
    assert "yaml-language-server" not in converted.text
    assert any("dropped" in line for line in converted.describe(Dialect.KUBEFLOW))


def test_convert_takes_a_directory_as_validate_does(tmp_path: Path) -> None:
    """`convert -w jobs/` over the template's jobs/<team>/ layout: every job converted,
    other files left byte for byte."""
    team = tmp_path / "jobs" / "vision"
    team.mkdir(parents=True)
    (team / "seeded.yaml").write_text(SEED_JOB)
    (team / "commented.yaml").write_text(COMMENTED)
    other = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}   # odd spacing kept\n"
    (tmp_path / "jobs" / "settings.yaml").write_text(other)
    result = CliRunner().invoke(main, ["convert", "-w", str(tmp_path / "jobs")])
    assert result.exit_code == 0, result.output
    for name in ("seeded.yaml", "commented.yaml"):
        assert "apiVersion: kubeflow.org/v1 " in (team / name).read_text().replace("\n", " ")
    assert (tmp_path / "jobs" / "settings.yaml").read_text() == other
    assert "job seeded: mxnet.mlkube.io/v1beta1 -> kubeflow.org/v1" in result.stderr


ALL_WORKERS_V1BETA1 = """\
apiVersion: kubeflow.org/v1beta1
kind: MXJob
metadata:
  name: byteps
spec:
  jobMode: MXTrain
  successPolicy: AllWorkers  # the workers decide
  mxReplicaSpecs:
    Scheduler: {replicas: 1, template: {spec: {containers: [{name: mxnet, image: i}]}}}
    Server: {replicas: 1, template: {spec: {containers: [{name: mxnet, image: i}]}}}
    Worker: {replicas: 2, template: {spec: {containers: [{name: mxnet, image: i}]}}}
"""


def test_success_policy_is_no_field_of_v1_so_convert_writes_it_as_mxgitops_annotation(
    tmp_path: Path,
) -> None:
    """kubeflow.org/v1's MXJobSpec has no successPolicy (mxnet-operator's v1beta1 had):
    the operator's CRD refuses it under strict validation, so v1 says it with the
    annotation mxgitops.io/success-policy, and a v1 spec.successPolicy is warned of."""
    before, _ = job_of(tmp_path, "before.yaml", ALL_WORKERS_V1BETA1)
    converted = convert_text(ALL_WORKERS_V1BETA1, Dialect.KUBEFLOW)
    doc = yaml.safe_load(converted.text)
    assert "successPolicy" not in doc["spec"]
    assert doc["metadata"]["annotations"] == {"mxgitops.io/success-policy": "AllWorkers"}
    after, warnings = job_of(tmp_path, "after.yaml", converted.text)
    assert after == before and not warnings
    old_style = ALL_WORKERS_V1BETA1.replace("kubeflow.org/v1beta1", "kubeflow.org/v1")
    _, warned = job_of(tmp_path, "v1.yaml", old_style)
    assert warned == ["spec.successPolicy"]
    (job,) = load(tmp_path / "v1.yaml").jobs
    assert job.success_policy.value == "AllWorkers"
