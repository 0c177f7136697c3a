"""Warnings: valid manifests with something worth a word, never silently dropped.

They are a class of finding beside problems: printed by `validate` as
`FILE:LINE: job NAME: field.path: warning: ...`, counted, in `-o json`, in
`diff` and in the status note, and failing nothing unless `--strict`.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace
from pathlib import Path

from click.testing import CliRunner, Result

from mxgitops.cli import main
from mxgitops.commands.review import render_json, render_markdown, render_text, review
from mxgitops.manifests.loading import LoadResult, load
from mxgitops.outputs import report
from mxgitops.planning.changes import Plan
from mxgitops.planning.ledger import Ledger
from mxgitops.runtimes.batch.render import render_job
from mxgitops.runtimes.shared.podtemplate import RenderContext

OLD_GPU = """\
apiVersion: mxnet.mlkube.io/v1beta1
kind: MxJob
metadata:
  name: old-gpu
spec:
  replicaSpecs:
    - template:
        spec:
          containers:
            - name: mxnet
              image: mxnet:gpu
              resources:
                limits:
                  alpha.kubernetes.io/nvidia-gpu: 1
"""
GPU_WARNING = (
    "old-gpu.yaml:14: job old-gpu: "
    "spec.replicaSpecs[0].template.spec.containers[0].resources.limits."
    "alpha.kubernetes.io/nvidia-gpu: warning: alpha.kubernetes.io/nvidia-gpu was removed in "
    "Kubernetes 1.10: no node offers it, so these pods would stay Pending forever; use "
    "nvidia.com/gpu"
)

KUBEFLOW = """\
apiVersion: kubeflow.org/v1
kind: MXJob
metadata:
  name: {name}
spec:
  mxReplicaSpecs:
    Worker:
      template:
        spec:
          containers: [{{name: mxnet, image: "mxnet:1.9"}}]
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def only_warning(result: LoadResult) -> str:
    assert result.ok, [str(p) for p in result.problems]
    assert len(result.warnings) == 1, [str(w) for w in result.warnings]
    return str(result.warnings[0])


# -- validate -------------------------------------------------------------------------------


def test_validate_prints_a_warning_counts_it_and_passes(tmp_path: Path) -> None:
    write(tmp_path, "old-gpu.yaml", OLD_GPU)
    result = invoke("validate", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        GPU_WARNING,
        "1 job valid, 0 invalid manifests, 0 problems, 1 warning, 0 documents ignored",
    ]


def test_validate_strict_fails_on_a_warning(tmp_path: Path) -> None:
    write(tmp_path, "old-gpu.yaml", OLD_GPU)
    assert invoke("validate", "--strict", str(tmp_path)).exit_code == 1
    write(
        tmp_path,
        "old-gpu.yaml",
        OLD_GPU.replace("alpha.kubernetes.io/nvidia-gpu", "nvidia.com/gpu"),
    )
    assert invoke("validate", "--strict", str(tmp_path)).exit_code == 0


def test_validate_json_lists_warnings_apart_from_problems(tmp_path: Path) -> None:
    write(tmp_path, "old-gpu.yaml", OLD_GPU)
    output = json.loads(invoke("validate", "-o", "json", str(tmp_path)).stdout)
    assert output["ok"] is True and output["problems"] == []
    (warning,) = output["warnings"]
    assert (warning["file"], warning["line"], warning["job"]) == ("old-gpu.yaml", 14, "old-gpu")
    assert warning["message"].startswith("alpha.kubernetes.io/nvidia-gpu was removed")


def test_an_invalid_older_manifest_still_says_what_it_was_read_as(tmp_path: Path) -> None:
    write(tmp_path, "old.yaml", KUBEFLOW.format(name="old").replace("v1\n", "v1alpha2\n", 1))
    write(tmp_path, "bad.yaml", KUBEFLOW.format(name="Bad").replace("v1\n", "v1beta1\n", 1))
    result = load(tmp_path)
    assert [p.file for p in result.problems] == ["bad.yaml"]
    assert [(w.file, w.line, w.field) for w in result.warnings] == [
        ("bad.yaml", 1, "apiVersion"),
        ("old.yaml", 1, "apiVersion"),
    ]
    assert result.warnings[1].message == (
        "read as kubeflow.org/v1alpha2 MXJob, an older API version; its current equivalent is "
        "kubeflow.org/v1 MXJob (mxgitops convert FILE rewrites it, comments kept)"
    )


# -- what mxgitops cannot honour ---------------------------------------------------------------


def test_a_scheduling_label_on_a_pod_template_is_not_silently_dropped(tmp_path: Path) -> None:
    text = KUBEFLOW.format(name="queued").replace(
        "      template:\n",
        "      template:\n        metadata: {labels: {scheduling.x-k8s.io/pod-group: team-a}}\n",
    )  # Kueue's own keys are refused there (tests/manifests/test_policy_hostile.py)
    write(tmp_path, "queued.yaml", text)
    warning = only_warning(load(tmp_path))
    assert "labels.scheduling.x-k8s.io/pod-group: warning: a scheduling label, " in warning
    assert "but mxgitops carries it onto the pods only" in warning and "runs unqueued" in warning


def test_the_queue_label_on_the_job_queues_it_on_jobset(tmp_path: Path) -> None:
    text = KUBEFLOW.format(name="queued").replace(
        "  name: queued\n", "  name: queued\n  labels: {kueue.x-k8s.io/queue-name: team-a}\n"
    )
    write(tmp_path, "queued.yaml", text)
    result = load(tmp_path)
    assert result.ok and result.warnings == [], [str(w) for w in result.warnings]
    (job,) = result.jobs
    assert (job.runtime, job.queue) == ("jobset", "team-a")


def test_scheduling_policy_priority_class_goes_onto_every_pod_gang_fields_warn(
    tmp_path: Path,
) -> None:
    text = KUBEFLOW.format(name="gang") + textwrap.indent(
        "runPolicy:\n  schedulingPolicy: {minAvailable: 1, minResources: {cpu: 1}, queue: research,"
        " priorityClass: high}\n",
        "  ",
    )
    write(tmp_path, "gang.yaml", text)
    result = load(tmp_path)
    assert result.ok, [str(p) for p in result.problems]
    # Queued: the job runs on JobSet, which Kueue admits whole (minAvailable 1 is all of
    # its one pod); minResources is not used, which is said with what happens instead.
    assert [(w.line, w.field) for w in result.warnings] == [
        (12, "spec.runPolicy.schedulingPolicy.minResources"),
    ]
    assert "Kueue admits the job by the resources its pods request" in result.warnings[0].message
    (job,) = result.jobs
    assert (job.runtime, job.queue, job.priority_class) == ("jobset", "research", "high")
    job = replace(job, runtime="batch")  # the pod templates are the runtime's input
    pods = [obj["spec"]["template"]["spec"] for obj in render_job(job, RenderContext("prod"))]
    assert [pod["priorityClassName"] for pod in pods] == ["high"]


def test_gang_fields_of_an_unqueued_job_say_it_runs_without_a_gang_scheduler(
    tmp_path: Path,
) -> None:
    text = KUBEFLOW.format(name="gang") + textwrap.indent(
        "runPolicy:\n  schedulingPolicy: {minAvailable: 3, scheduleTimeoutSeconds: 60}\n", "  "
    )
    write(tmp_path, "gang.yaml", text)
    result = load(tmp_path)
    assert [w.field for w in result.warnings] == [
        "spec.runPolicy.schedulingPolicy.minAvailable",
        "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds",
    ]
    assert "minAvailable 3 is not enforced" in result.warnings[0].message
    assert "without a gang scheduler" in result.warnings[1].message
    assert result.jobs[0].runtime == "batch"


def test_the_older_inline_scheduling_policy_is_read_too(tmp_path: Path) -> None:
    text = KUBEFLOW.format(name="gang") + "  schedulingPolicy: {priorityClass: low}\n"
    write(tmp_path, "gang.yaml", text)
    result = load(tmp_path)
    assert result.ok and result.warnings == []
    assert result.jobs[0].replica_specs[0].template["spec"]["priorityClassName"] == "low"


def test_a_template_priority_class_wins_with_a_warning(tmp_path: Path) -> None:
    text = (
        KUBEFLOW.format(name="gang").replace(
            "        spec:\n", "        spec:\n          priorityClassName: mine\n"
        )
        + "  runPolicy: {schedulingPolicy: {priorityClass: high}}\n"
    )
    write(tmp_path, "gang.yaml", text)
    warning = only_warning(load(tmp_path))
    assert "template.spec.priorityClassName: warning: mine is this replica's priority" in warning


# -- kubectl get output ---------------------------------------------------------------------


def test_kubectl_get_output_is_refused_with_one_message(tmp_path: Path) -> None:
    dump = KUBEFLOW.format(name="dumped").replace(
        "  name: dumped\n",
        "  name: dumped\n  uid: 0b7c\n  resourceVersion: '42'\n  creationTimestamp: '2020-01-01'\n",
    )
    write(tmp_path, "dump.yaml", dump + "status:\n  conditions: []\n")
    result = load(tmp_path)
    (problem,) = result.problems
    assert (problem.line, problem.field) == (14, "status")
    assert problem.message == (
        "this is `kubectl get` output, not a manifest (status, metadata.uid, "
        "metadata.resourceVersion, metadata.creationTimestamp): remove those fields, or run "
        "mxgitops convert FILE, which does"
    )
    assert result.invalid_keys == {("default", "dumped")}


def test_an_empty_status_alone_is_accepted_with_a_warning(tmp_path: Path) -> None:
    write(tmp_path, "job.yaml", KUBEFLOW.format(name="fresh") + "status: {}\n")
    warning = only_warning(load(tmp_path))
    assert warning == (
        "job.yaml:11: job fresh: status: warning: an empty status is ignored; a manifest has none"
    )


# -- hints ------------------------------------------------------------------------------------


def test_a_kubeflow_manifest_with_a_list_of_replica_specs_is_told_of_the_seed_dialect(
    tmp_path: Path,
) -> None:
    text = OLD_GPU.replace("mxnet.mlkube.io/v1beta1", "kubeflow.org/v1").replace("MxJob", "MXJob")
    write(tmp_path, "job.yaml", text)
    problems = {p.field: p.message for p in load(tmp_path).problems}
    assert problems["spec"] == (
        'unknown field "replicaSpecs": a list of replica specs is the seed dialect\'s form '
        "(apiVersion mxnet.mlkube.io/v1beta1, kind MxJob); kubeflow.org/v1 takes "
        "mxReplicaSpecs, a map of Scheduler, Server and Worker"
    )


def test_a_duplicate_of_an_unsupported_document_says_so(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", KUBEFLOW.format(name="twin"))
    write(tmp_path, "b.yaml", KUBEFLOW.format(name="twin") + "  jobMode: MXTune\n")
    messages = {p.file: p.message for p in load(tmp_path).problems if p.field == "metadata.name"}
    assert messages["a.yaml"] == (
        "job default/twin is defined more than once (also at b.yaml:4, which is refused: "
        "jobMode MXTune is not supported)"
    )


# -- diff and the note ----------------------------------------------------------------------------


def test_diff_shows_the_warnings_a_change_brings(tmp_path: Path) -> None:
    write(
        tmp_path / "base", "old-gpu.yaml", OLD_GPU.replace("alpha.kubernetes.io/nvidia-gpu", "cpu")
    )
    write(tmp_path / "head", "old-gpu.yaml", OLD_GPU)
    result = review(load(tmp_path / "base"), load(tmp_path / "head"))
    assert result.ok
    assert f"  ? {GPU_WARNING}" in render_text(result).splitlines()
    assert GPU_WARNING in render_markdown(result)
    assert json.loads(render_json(result))["warnings"][0]["line"] == 14
    unchanged = review(load(tmp_path / "head"), load(tmp_path / "head"))
    assert unchanged.warnings == []


def test_the_note_carries_warnings_and_reads_them_back() -> None:
    summary = report.summarize(
        Plan(changes=(), ledger=Ledger()), None, warnings=[GPU_WARNING], commit="c0ffee"
    )
    assert summary.ok
    note = report.render_note(summary)
    assert GPU_WARNING in note.split(report.NOTE_MARKER)[0]
    parsed = report.parse_note(note)
    assert parsed is not None and parsed.warnings == (GPU_WARNING,)
