"""Loading and validating manifest files: every bad input ends in one readable line."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mxgitops.errors import ConfigError
from mxgitops.manifests.files import Problem
from mxgitops.manifests.loading import LoadResult, load
from mxgitops.manifests.schema import SCHEMA_FILES, schema
from mxgitops.manifests.yamldoc import documents
from mxgitops.model import Dialect, JobMode
from tests.helpers import corpus
from tests.helpers.corpus import Corpus, Shape

REPO = Path(__file__).resolve().parents[2]

LOCAL = """\
apiVersion: mxnet.mlkube.io/v1beta1
kind: MxJob
metadata:
  name: {name}
spec:
  jobMode: local
  replicaSpecs:
    - replicas: 1
      mxReplicaType: WORKER
      template:
        spec:
          containers:
            - name: mxnet
              image: mxnet:1.9
"""

GPU = """\
apiVersion: kubeflow.org/v1
kind: MXJob
metadata:
  name: {name}
  namespace: vision
spec:
  jobMode: MXTrain
  mxReplicaSpecs:
    Scheduler:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
            - name: mxnet
              image: mxnet:gpu
    Server:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
            - name: mxnet
              image: mxnet:gpu
    Worker:
      replicas: 2
      restartPolicy: Never
      template:
        spec:
          containers:
            - name: mxnet
              image: mxnet:gpu
              resources:
                limits:
                  nvidia.com/gpu: 1
"""

CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  a: b
"""


def write(root: Path, name: str, text: str | bytes) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text))
    return path


def only_problem(result: LoadResult) -> Problem:
    assert len(result.problems) == 1, [str(p) for p in result.problems]
    return result.problems[0]


def local_with(tmp_path: Path, old: str, new: str, name: str = "job.yaml") -> LoadResult:
    text = LOCAL.format(name="train")
    assert old in text
    write(tmp_path, name, text.replace(old, new))
    return load(tmp_path)


# -- the example manifests (tests/helpers/corpus.py) ----------------------------------


@pytest.mark.parametrize("examples", corpus.params())
def test_every_example_validates_except_mxtune(examples: Corpus) -> None:
    files = sorted(p.name for p in examples.files())
    assert len(files) >= 5, files
    result = load(examples.root)
    problem = only_problem(result)
    tune = examples[Shape.TUNE_GPU]
    assert problem.file == tune.file
    assert (problem.line, problem.job, problem.field) == (6, tune.job, "spec.jobMode")
    assert "MXTune is not supported" in problem.message
    assert result.invalid_keys == {("default", tune.job)}
    valid = {job.source_path for job in result.jobs}
    assert valid == set(files) - {tune.file}
    modes = {job.name: job.mode for job in result.jobs}
    assert modes[examples[Shape.SEED_LOCAL].job] is JobMode.LOCAL
    assert modes[examples[Shape.SEED_DIST].job] is JobMode.DIST


# -- walking the tree -----------------------------------------------------------------


def test_loads_a_tree_of_manifests(tmp_path: Path) -> None:
    write(tmp_path, "jobs/vision/resnet.yaml", LOCAL.format(name="resnet"))
    write(tmp_path, "jobs/vision/gpu.yml", GPU.format(name="gpu-job"))
    write(tmp_path, "jobs/notes.txt", "not yaml: [")
    result = load(tmp_path, default_namespace="ml")
    assert result.ok
    assert [(j.namespace, j.name, j.source_path) for j in result.jobs] == [
        ("ml", "resnet", "jobs/vision/resnet.yaml"),
        ("vision", "gpu-job", "jobs/vision/gpu.yml"),
    ]
    assert result.jobs[1].dialect is Dialect.KUBEFLOW
    assert result.summary() == "2 jobs valid, 0 invalid manifests, 0 problems, 0 documents ignored"


def test_skips_hidden_files_and_directories(tmp_path: Path) -> None:
    write(tmp_path, "job.yaml", LOCAL.format(name="train"))
    write(tmp_path, ".mxgitops.yaml", "namespace: [unclosed")
    write(tmp_path, ".git/config.yaml", "bad: [")
    write(tmp_path, ".github/workflows/validate.yml", "on: [push\n")
    write(tmp_path, "jobs/.draft.yaml", "bad: [")
    result = load(tmp_path)
    assert result.ok
    assert [job.name for job in result.jobs] == ["train"]


def test_multi_document_files_empty_documents_and_other_kinds(tmp_path: Path) -> None:
    text = (
        "---\n"
        + LOCAL.format(name="a")
        + "---\n---\n"
        + CONFIGMAP
        + "---\n"
        + LOCAL.format(name="b")
    )
    write(tmp_path, "all.yaml", text)
    result = load(tmp_path)
    assert result.ok
    assert [job.name for job in result.jobs] == ["a", "b"]
    (ignored,) = result.ignored
    assert (ignored.file, ignored.line, ignored.kind, ignored.name) == (
        "all.yaml",
        18,
        "ConfigMap",
        "settings",
    )
    assert str(ignored) == "all.yaml:18: ignored ConfigMap settings: not an MxJob"
    assert result.summary() == "2 jobs valid, 0 invalid manifests, 0 problems, 1 document ignored"


def test_a_file_given_directly_keeps_its_name(tmp_path: Path) -> None:
    path = write(tmp_path, "jobs/one.yaml", LOCAL.format(name="one"))
    result = load([str(path)])
    assert [job.source_path for job in result.jobs] == [str(path)]


def test_missing_path_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file or directory"):
        load(tmp_path / "nope")


def test_the_same_file_through_two_roots_is_read_once(tmp_path: Path) -> None:
    write(tmp_path, "jobs/one.yaml", LOCAL.format(name="one"))
    result = load([tmp_path, tmp_path / "jobs"])
    assert result.ok
    assert len(result.jobs) == 1


# -- bad input, one line each -------------------------------------------------------------


def test_malformed_yaml_reports_the_line_and_goes_on(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "apiVersion: v1\nkind: MxJob\nmetadata: {name: x\nspec: 1\n")
    write(tmp_path, "b.yaml", LOCAL.format(name="fine"))
    result = load(tmp_path)
    problem = only_problem(result)
    assert problem.file == "a.yaml"
    assert problem.line == 4
    assert problem.message.startswith("invalid YAML: ")
    assert [job.name for job in result.jobs] == ["fine"]
    assert result.unnamed_invalid == 1
    assert str(problem).startswith("a.yaml:4: invalid YAML")


def test_a_document_that_is_not_a_mapping(tmp_path: Path) -> None:
    write(tmp_path, "list.yaml", "# a comment\n- a\n- b\n")
    problem = only_problem(load(tmp_path))
    assert (problem.file, problem.line, problem.job, problem.field) == ("list.yaml", 2, None, "")
    assert problem.message == (
        "a manifest must be a mapping (apiVersion: ..., kind: ...), not a list"
    )


def test_wrong_type(tmp_path: Path) -> None:
    problem = only_problem(local_with(tmp_path, "replicas: 1", "replicas: abc"))
    assert (problem.line, problem.job) == (8, "train")
    assert problem.field == "spec.replicaSpecs[0].replicas"
    assert problem.message == 'must be an integer, not "abc"'
    assert str(problem) == (
        'job.yaml:8: job train: spec.replicaSpecs[0].replicas: must be an integer, not "abc"'
    )


def test_unknown_field_is_named_at_its_parent(tmp_path: Path) -> None:
    problem = only_problem(local_with(tmp_path, "  jobMode: local", "  jobMode: local\n  foo: 1"))
    assert (problem.line, problem.field) == (7, "spec")
    assert problem.message == 'unknown field "foo"'
    assert str(problem) == 'job.yaml:7: job train: spec: unknown field "foo"'


def test_unknown_field_suggests_the_close_one(tmp_path: Path) -> None:
    problem = only_problem(local_with(tmp_path, "- replicas: 1", "- replica: 1"))
    assert (problem.line, problem.field) == (8, "spec.replicaSpecs[0]")
    assert problem.message == 'unknown field "replica"; did you mean "replicas"?'


def test_unknown_field_in_the_pod_template_is_rejected(tmp_path: Path) -> None:
    result = local_with(
        tmp_path, "image: mxnet:1.9", "image: mxnet:1.9\n              imagePolicy: x"
    )
    problem = only_problem(result)
    assert problem.field == "spec.replicaSpecs[0].template.spec.containers[0]"
    assert problem.line == 15
    assert problem.message.startswith('unknown field "imagePolicy"')


def test_kubernetes_types_in_the_pod_template(tmp_path: Path) -> None:
    text = "image: mxnet:1.9\n              resources: {limits: {cpu: {a: 1}}}"
    problem = only_problem(local_with(tmp_path, "image: mxnet:1.9", text))
    assert problem.field == "spec.replicaSpecs[0].template.spec.containers[0].resources.limits.cpu"
    assert problem.message == "must be a string or a number, not a mapping"


def test_yaml_booleans_in_labels_are_type_errors(tmp_path: Path) -> None:
    problem = only_problem(
        local_with(tmp_path, "  name: train", "  name: train\n  labels: {gpu: yes}")
    )
    assert problem.field == "metadata.labels.gpu"
    assert problem.message == "must be a string, not true"


def test_enum(tmp_path: Path) -> None:
    problem = only_problem(local_with(tmp_path, "jobMode: local", "jobMode: distributed"))
    assert (problem.line, problem.field) == (6, "spec.jobMode")
    assert problem.message == 'must be one of "local", "dist"; not "distributed"'


def test_range(tmp_path: Path) -> None:
    result = local_with(
        tmp_path, "mxReplicaType: WORKER", "mxReplicaType: WORKER\n      PsRootPort: 70000"
    )
    problem = only_problem(result)
    assert (problem.line, problem.field) == (10, "spec.replicaSpecs[0].PsRootPort")
    assert problem.message == "must be at most 65535, not 70000"


def test_missing_name_is_required(tmp_path: Path) -> None:
    problem = only_problem(local_with(tmp_path, "  name: train", "  labels: {}"))
    assert (problem.line, problem.job, problem.field) == (3, None, "metadata.name")
    assert problem.message == "is required"
    assert str(problem) == "job.yaml:3: metadata.name: is required"


def test_all_distinct_schema_errors_are_reported(tmp_path: Path) -> None:
    text = (
        LOCAL.format(name="train")
        .replace("replicas: 1", "replicas: 0")
        .replace("jobMode: local", "jobMode: 3")
    )
    write(tmp_path, "job.yaml", text)
    result = load(tmp_path)
    assert {(p.field, p.message) for p in result.problems} == {
        ("spec.jobMode", 'must be one of "local", "dist"; not 3'),
        ("spec.replicaSpecs[0].replicas", "must be at least 1, not 0"),
    }
    assert result.invalid_manifests == 1
    assert result.invalid_keys == {("default", "train")}


def test_semantic_problems_carry_their_line(tmp_path: Path) -> None:
    problem = only_problem(local_with(tmp_path, "- name: mxnet", "- name: main"))
    assert problem.field == "spec.replicaSpecs[0].template.spec.containers"
    assert problem.line == 12
    assert problem.message == "every pod template needs a container named 'mxnet'"


def test_mxtune_gets_its_own_message_not_schema_errors(tmp_path: Path) -> None:
    write(tmp_path, "tune.yaml", GPU.format(name="tune").replace("MXTrain", "MXTune"))
    problem = only_problem(load(tmp_path))
    assert problem.field == "spec.jobMode"
    assert problem.message.startswith("jobMode MXTune is not supported")


def test_mxjob_kind_with_an_unknown_api_version(tmp_path: Path) -> None:
    text = LOCAL.format(name="train").replace("mxnet.mlkube.io/v1beta1", "kubeflow.org/v1")
    write(tmp_path, "job.yaml", text)
    result = load(tmp_path)
    problem = only_problem(result)
    assert (problem.line, problem.field) == (2, "kind")
    assert problem.message.startswith("apiVersion kubeflow.org/v1 takes kind MXJob: use ")
    assert result.invalid_keys == {("default", "train")}


def test_duplicate_yaml_keys(tmp_path: Path) -> None:
    problem = only_problem(
        local_with(tmp_path, "  jobMode: local", "  jobMode: local\n  jobMode: dist")
    )
    assert (problem.line, problem.field) == (7, "spec.jobMode")
    assert problem.message == "duplicate key (also on line 6)"


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for level in "bcdefgh":
        previous = levels[-1][0]
        levels.append(f"{level}: &{level} [" + ", ".join([f"*{previous}"] * 10) + "]")
    write(tmp_path, "bomb.yaml", "\n".join(levels) + "\n")
    write(tmp_path, "ok.yaml", LOCAL.format(name="fine"))
    result = load(tmp_path)
    problem = only_problem(result)
    assert problem.file == "bomb.yaml"
    assert problem.line == 5  # where the expansion passes the bound
    assert "expands to more than 100000 values" in problem.message
    assert [job.name for job in result.jobs] == ["fine"]


def test_recursive_alias_and_deep_nesting_are_refused(tmp_path: Path) -> None:
    write(tmp_path, "loop.yaml", "a: &a [1, *a]\n")
    write(tmp_path, "deep.yaml", "a:\n  b: " + "[" * 100 + "]" * 100 + "\n")
    write(tmp_path, "deeper.yaml", "- " * 300_000 + "x\n")
    write(tmp_path, "deepest.yaml", "[" * 500_000)
    result = load(tmp_path)
    messages = {p.file: (p.line, p.message) for p in result.problems}
    assert messages.pop("loop.yaml") == (1, "alias *a refers to a value that contains it")
    assert messages.pop("deep.yaml") == (2, "nested more than 64 levels deep")
    assert messages.pop("deeper.yaml") == (1, "nested more than 64 levels deep")
    _, message = messages.pop("deepest.yaml")  # libyaml may stop it first
    assert "nest" in message


def test_aliases_and_merge_keys_within_bounds_work(tmp_path: Path) -> None:
    text = """\
    apiVersion: mxnet.mlkube.io/v1beta1
    kind: MxJob
    metadata:
      name: shared
    spec:
      jobMode: dist
      replicaSpecs:
        - mxReplicaType: SCHEDULER
          template: &pod
            spec:
              containers: [{name: mxnet, image: "mxnet:1.9"}]
        - mxReplicaType: SERVER
          template: *pod
        - <<: {replicas: 2, mxReplicaType: WORKER}
          template: *pod
    """
    write(tmp_path, "job.yaml", text)
    result = load(tmp_path)
    assert result.ok, [str(p) for p in result.problems]
    (job,) = result.jobs
    assert [r.replicas for r in job.replica_specs] == [1, 1, 2]


def test_explicit_tags_with_bad_values(tmp_path: Path) -> None:
    problem = only_problem(local_with(tmp_path, "replicas: 1", "replicas: !!int many"))
    assert (problem.line, problem.message) == (8, "'many' is not a valid !!int")
    problem = only_problem(local_with(tmp_path, "replicas: 1", "replicas: !custom 1"))
    assert problem.message == "unknown YAML tag !custom"


def test_random_damage_never_raises(tmp_path: Path) -> None:
    """Bad input ends in problems, never in an exception: damage valid files at random."""
    rng = random.Random(2024)
    texts = [LOCAL.format(name="train"), GPU.format(name="gpu")]
    pieces = [*" \n:-[]{}&*!|>'\"#,?~0aZ", "<<: ", "*a", "&a ", "!!int ", "\t", "null", "yes"]
    for _ in range(300):
        text = list(rng.choice(texts))
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(text) + 1)
            if rng.random() < 0.5:
                del text[at : at + rng.randint(1, 5)]
            else:
                text[at:at] = list(rng.choice(pieces))
        (tmp_path / "job.yaml").write_text("".join(text))
        result = load(tmp_path)
        assert result.ok or result.problems


def test_plain_scalars_are_read_alike_however_long_or_often() -> None:
    """What a short plain scalar reads as is remembered; a long one is resolved each time."""
    number, word = "1" * 80, "n" * 80
    text = f"name: yes\nnull: ~\non: 0x1F\nnumber: {number}\nword: {word}\ntext: nope\n"
    expected = {"name": True, "null": None, "on": 31, "number": int(number), "word": word}
    for _ in range(2):  # the second time from what the first remembered
        (document,) = documents(text)
        assert document.data == {**expected, "text": "nope"}
        assert document.line_of(("text",)) == 6


def test_file_at_the_size_limit_is_read_whole(tmp_path: Path) -> None:
    text = LOCAL.format(name="full")
    write(tmp_path, "full.yaml", text + "#" * (1023 - len(text.encode())) + "\n")
    assert (tmp_path / "full.yaml").stat().st_size == 1024
    result = load(tmp_path, max_file_size=1024)
    assert result.ok and [job.name for job in result.jobs] == ["full"]


def test_file_over_the_size_limit(tmp_path: Path) -> None:
    write(tmp_path, "big.yaml", LOCAL.format(name="big") + "#" * 2048 + "\n")
    write(tmp_path, "small.yaml", LOCAL.format(name="small"))
    result = load(tmp_path, max_file_size=1024)
    problem = only_problem(result)
    assert (problem.file, problem.line) == ("big.yaml", 0)
    assert problem.message.startswith("file is 2.")
    assert "over the limit of 1 KiB" in problem.message
    assert str(problem).startswith("big.yaml: file is")
    assert [job.name for job in result.jobs] == ["small"]


def test_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    write(tmp_path, "latin1.yaml", b"apiVersion: v1\nkind: ConfigMap\ndata: {a: caf\xe9}\n")
    problem = only_problem(load(tmp_path))
    assert (problem.file, problem.line) == ("latin1.yaml", 3)
    assert problem.message == "not UTF-8 text (byte 0xe9); save the file as UTF-8"


def test_symlink_outside_the_tree_is_not_followed(tmp_path: Path) -> None:
    outside = write(tmp_path, "outside/secret.yaml", LOCAL.format(name="secret"))
    write(tmp_path, "outside/dir/other.yaml", LOCAL.format(name="other"))
    root = tmp_path / "repo"
    write(root, "jobs/real.yaml", LOCAL.format(name="real"))
    (root / "jobs/link.yaml").symlink_to(outside)
    (root / "linked-dir").symlink_to(tmp_path / "outside/dir")
    result = load(root)
    assert [job.name for job in result.jobs] == ["real"]
    assert {(p.file, p.line) for p in result.problems} == {("jobs/link.yaml", 0), ("linked-dir", 0)}
    for problem in result.problems:
        assert f"points outside {root}; not followed" in problem.message


def test_symlink_inside_the_tree_is_fine_and_read_once(tmp_path: Path) -> None:
    write(tmp_path, "jobs/real.yaml", LOCAL.format(name="real"))
    write(tmp_path, "templates/shared.yaml", LOCAL.format(name="shared"))
    (tmp_path / "jobs/shared.yaml").symlink_to(tmp_path / "templates/shared.yaml")
    (tmp_path / "jobs/alias.yaml").symlink_to("real.yaml")
    (tmp_path / "again").symlink_to(tmp_path / "jobs")
    result = load(tmp_path)
    assert result.ok, [str(p) for p in result.problems]
    assert sorted((j.name, j.source_path) for j in result.jobs) == [
        ("real", "jobs/real.yaml"),
        ("shared", "templates/shared.yaml"),
    ]


def test_broken_symlink(tmp_path: Path) -> None:
    (tmp_path / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")
    problem = only_problem(load(tmp_path))
    assert problem.file == "gone.yaml"
    assert problem.message == "cannot read: broken symlink or file removed"


def test_symlink_loop(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").symlink_to("b.yaml")
    (tmp_path / "b.yaml").symlink_to("a.yaml")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs/up").symlink_to("..")
    result = load(tmp_path)
    assert {(p.file, p.message) for p in result.problems} == {
        ("a.yaml", "cannot read: Too many levels of symbolic links"),
        ("b.yaml", "cannot read: Too many levels of symbolic links"),
    }


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = write(tmp_path, "locked.yaml", LOCAL.format(name="locked"))
    write(tmp_path, "open.yaml", LOCAL.format(name="open"))
    real_open = Path.open

    def deny(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", deny)
    result = load(tmp_path)
    problem = only_problem(result)
    assert (problem.file, problem.message) == ("locked.yaml", "cannot read: Permission denied")
    assert [job.name for job in result.jobs] == ["open"]


def test_a_fifo_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")
    problem = only_problem(load(tmp_path))
    assert (problem.file, problem.message) == ("pipe.yaml", "not a regular file")


# -- duplicates and invalid keys ------------------------------------------------------------


def test_duplicate_job_names_are_reported_on_both_files(tmp_path: Path) -> None:
    write(tmp_path, "a/job.yaml", LOCAL.format(name="train"))
    write(tmp_path, "b/job.yaml", LOCAL.format(name="train"))
    write(
        tmp_path,
        "c/job.yaml",
        LOCAL.format(name="train").replace("  name: train", "  name: train\n  namespace: other"),
    )
    result = load(tmp_path)
    assert [str(p) for p in result.problems] == [
        "a/job.yaml:4: job train: metadata.name: "
        "job default/train is defined more than once (also at b/job.yaml:4)",
        "b/job.yaml:4: job train: metadata.name: "
        "job default/train is defined more than once (also at a/job.yaml:4)",
    ]
    assert [job.key for job in result.jobs] == [("other", "train")]
    assert result.invalid_keys == {("default", "train")}
    assert result.invalid_manifests == 2


def test_a_valid_and_an_invalid_manifest_of_the_same_job(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", LOCAL.format(name="train"))
    write(tmp_path, "b.yaml", LOCAL.format(name="train").replace("replicas: 1", "replicas: x"))
    result = load(tmp_path)
    assert result.jobs == []
    assert result.invalid_keys == {("default", "train")}
    assert {p.file for p in result.problems} == {"a.yaml", "b.yaml"}


# -- schemas -----------------------------------------------------------------------------------


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "generate_schemas", REPO / "scripts/generate_schemas.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_schemas_equal_the_generators_output() -> None:
    generator = _generator()
    texts = generator.build_schemas()
    assert set(texts) == set(SCHEMA_FILES.values())
    for directory in ("schemas", "mxgitops/schemas"):
        for name, text in texts.items():
            assert (REPO / directory / name).read_text() == text, (
                f"{directory}/{name} is stale: run python scripts/generate_schemas.py"
            )


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(_refs(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(value) for value in node))
    return set()


@pytest.mark.parametrize("dialect", list(Dialect))
def test_schemas_are_self_contained_draft_2020_12(dialect: Dialect) -> None:
    loaded = schema(dialect)  # from the package data, as the installed package reads it
    assert loaded["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    refs = _refs(loaded)
    assert refs, "the pod template is referenced"
    assert all(ref.startswith("#/$defs/") for ref in refs)
    defs = set(loaded["$defs"])
    assert {ref.removeprefix("#/$defs/") for ref in refs} == defs  # all used, all there
    assert "io.k8s.api.core.v1.PodSpec" in defs
    assert "io.k8s.api.apps.v1.Deployment" not in defs  # only what PodTemplateSpec reaches
    pod_spec = loaded["$defs"]["io.k8s.api.core.v1.PodSpec"]
    assert pod_spec["additionalProperties"] is False


def test_json_report(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", LOCAL.format(name="train"))
    write(tmp_path, "b.yaml", CONFIGMAP)
    write(tmp_path, "c.yaml", "- 1\n")
    report = json.loads(json.dumps(load(tmp_path).to_json()))
    assert report["ok"] is False
    (job,) = report["jobs"]
    assert job["name"] == "train" and job["file"] == "a.yaml" and len(job["spec_hash"]) == 64
    assert report["problems"][0]["file"] == "c.yaml"
    assert report["ignored"][0]["kind"] == "ConfigMap"
    assert report["summary"] == "1 job valid, 1 invalid manifest, 1 problem, 1 document ignored"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "apiVersion: v1\nmetadata:\n\tname: x\n",
            3,
            "invalid YAML: a tab at column 1: YAML indents with spaces only; "
            "replace the tab with spaces",
        ),
        (
            "kind: [\n",
            1,
            "invalid YAML: unclosed '[' at column 7: the file ends before its ']'",
        ),
        (
            "kind: MxJob\nspec:\n  x: [1, {a: 2}\n\n",
            3,
            "invalid YAML: unclosed '[' at column 6: the file ends before its ']'",
        ),
        (
            "a: b: c\n",
            1,
            "invalid YAML: mapping values are not allowed in this context at column 5",
        ),
    ],
    ids=["tab", "bracket", "bracket-nested", "column"],
)
def test_a_yaml_error_says_where_and_what_to_do(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    """A tab, an unclosed bracket: the line and column where the fix goes (never past
    the end of the file), and the fix."""
    write(tmp_path, "a.yaml", text)
    problem = only_problem(load(tmp_path))
    assert (problem.line, problem.message) == (line, message)
