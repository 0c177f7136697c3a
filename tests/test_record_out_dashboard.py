"""The Grafana dashboard's training panels (cronjob/components/monitoring/dashboard.json):
the JSON parses, and each training panel reads metrics `metrics.training_registry`
pushes, with the labels it pushes them under."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mxgitops.outputs import metrics
from tests.helpers.records import finished_record, job, running_record, summary_with

DASHBOARD = Path(__file__).resolve().parents[1] / "cronjob/components/monitoring/dashboard.json"


def training_panels() -> list[dict[str, Any]]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [p for p in panels if any("mxgitops_training_" in t["expr"] for t in p["targets"])]


def test_the_dashboard_shows_progress_and_the_latest_metric_per_job() -> None:
    panels = {p["title"]: p for p in training_panels()}
    assert set(panels) == {"Training progress, by job", "Latest training metrics, by job"}
    progress = panels["Training progress, by job"]
    assert progress["fieldConfig"]["defaults"]["unit"] == "percentunit"
    assert progress["targets"][0]["legendFormat"] == "{{namespace}}/{{name}}"
    ids = [p["id"] for p in json.loads(DASHBOARD.read_text())["panels"]]
    assert len(ids) == len(set(ids))


def test_each_training_panel_reads_what_a_sync_pushes_under_its_labels() -> None:
    summary = summary_with(
        job("running", "Running", running_record(5)), job("done", "Succeeded", finished_record())
    )
    registry = metrics.training_registry(summary)
    pushed = {s.name: set(s.labels) for f in registry.collect() for s in f.samples}
    for panel in training_panels():
        for target in panel["targets"]:
            for name in re.findall(r"\bmxgitops_\w+", target["expr"]):
                assert name in pushed, (panel["title"], name)
                shown = set(re.findall(r"{{(\w+)}}", target.get("legendFormat", "")))
                assert shown <= pushed[name] | {"instance", "job"}, (panel["title"], shown)
        organize = [t for t in panel.get("transformations", []) if t["id"] == "organize"]
        for step in organize:
            columns = set(step["options"]["indexByName"]) - {"Value"}
            assert columns <= pushed["mxgitops_training_metric"], columns
