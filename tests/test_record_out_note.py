"""The training record in the note's readable text and its markdown form
(`report.render_note`, `report.render_markdown`): progress, metrics, and a finished
run's duration and resource use, bounded and inert whatever the names."""

from __future__ import annotations

import re
from dataclasses import replace

from mxgitops.outputs import report
from mxgitops.outputs.markdown import code
from mxgitops.outputs.recordtext import MAX_LINE
from tests.helpers.records import (
    FINAL_VALIDATION_ACCURACY,
    HOSTILE_NAMES,
    finished_record,
    hostile_record,
    job,
    running_record,
    summary_with,
)


def readable(note: str) -> list[str]:
    """The note's lines above the machine-readable block."""
    return note.split(report.NOTE_MARKER)[0].splitlines()


def test_a_running_job_shows_its_epoch_progress_eta_throughput_and_metrics() -> None:
    summary = summary_with(job("resnet", "Running", running_record(declared_epochs=5)))
    lines = readable(report.render_note(summary))
    # Module.fit's first epoch ended (Time cost=0.154), the second runs: 1 of 5 done.
    assert "ml/resnet: training: epoch 2/5 20% ETA 1s, 32100 samples/s" in lines
    metrics = next(line for line in lines if line.startswith("ml/resnet: metrics: "))
    assert metrics.startswith("ml/resnet: metrics: validation-accuracy 0.335938, ")
    assert "train-accuracy 0.375 (best 0.346354)" in metrics
    assert not any("GPU-hours" in line for line in lines)  # not finished: no use yet


def test_a_finished_run_shows_duration_gpu_and_cpu_hours() -> None:
    summary = summary_with(job("resnet", "Succeeded", finished_record()))
    lines = readable(report.render_note(summary))
    assert "ml/resnet: training: epoch 3/3 100%, 32538 samples/s" in lines
    assert f"validation-accuracy {FINAL_VALIDATION_ACCURACY}" in "\n".join(lines)
    assert "ml/resnet: ran 1h 30m, 1.5 GPU-hours, 4.5 CPU-core-hours" in lines


def test_an_estimate_says_so() -> None:
    record = finished_record()
    assert record.resources is not None
    estimated = replace(record, resources=replace(record.resources, estimate=True))
    lines = readable(report.render_note(summary_with(job("resnet", "Failed", estimated))))
    assert any(line.endswith("CPU-core-hours (estimate)") for line in lines), lines


def test_a_job_without_a_record_says_nothing_of_training() -> None:
    lines = readable(report.render_note(summary_with(job("plain", "Running", None))))
    assert not any("training" in line or "metrics:" in line for line in lines)


def test_the_markdown_form_keeps_each_record_line_in_a_code_span() -> None:
    text = report.render_markdown(summary_with(job("resnet", "Succeeded", finished_record())))
    assert f"- {code('ml/resnet: ran 1h 30m, 1.5 GPU-hours, 4.5 CPU-core-hours')}" in text


def test_hostile_metric_names_and_values_are_bounded_and_inert() -> None:
    summary = summary_with(job("evil", "Succeeded", hostile_record()))
    lines = report.render_table(summary).splitlines()  # the note's readable part
    said = [line for line in lines if line.startswith("ml/evil: ")]
    assert len(said) == 3 and all(len(line) <= MAX_LINE + len("ml/evil: ") for line in said)
    text = "\n".join(said)
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    assert not any(line.startswith("Injected") for line in lines)  # no line added
    assert "nan" not in text.lower() and "inf" not in text  # NaN, inf: left out
    assert "n" * 100 not in text  # the 10,000-character name is cut
    assert "? GPU-hours, ? CPU-core-hours (estimate)" in text
    markdown = report.render_markdown(summary)
    assert not any(line.startswith("Injected") for line in markdown.splitlines())
    for line in markdown.splitlines():
        if line.startswith("- ml/evil") or "ml/evil: " in line:
            fence = re.fullmatch(r"- (`+) ?ml/evil: .*? ?(`+)", line)
            assert fence is not None and fence.group(1) == fence.group(2), line
            assert fence.group(1) not in line[len(fence.group(1)) + 2 : -len(fence.group(1))]


def test_hostile_names_cannot_forge_or_hide_the_machine_readable_block() -> None:
    record = hostile_record()
    finite = replace(
        record,
        log=replace(record.log, latest={}, best={}, throughput=None),
        resources=None,
    )
    names = (*HOSTILE_NAMES, report.NOTE_MARKER + "\n{}")
    finite = replace(finite, log=replace(finite.log, latest=dict.fromkeys(names, 0.5)))
    note = report.render_note(summary_with(job("evil", "Running", finite)))
    *_, marker, machine = note.rstrip("\n").split("\n")
    assert marker == report.NOTE_MARKER and machine.startswith("{")
    assert note.count(report.NOTE_MARKER + "\n") == 1
