"""`mxgitops install --dashboard`: the dashboard component (packaged beside the others,
cronjob/components/dashboard a link to it) rendered as `kubectl kustomize` renders the
overlay with it, its Deployment running the image install names with the rendered
ConfigMap, and exported."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from mxgitops.cli import ExitCode, main
from mxgitops.install.overlay import CONFIG_MAP, Installation
from mxgitops.install.render import render
from tests.install.test_render import REPO, kubectl_kustomize

IMAGE = "registry.example.com/team/mxgitops:0.2.0"
DASHBOARD = Installation(repo=REPO, image=IMAGE, namespace="ml-gitops", dashboard=True)


def test_the_dashboards_rendering_is_kubectl_kustomizes(tmp_path: Path) -> None:
    assert render(DASHBOARD) == kubectl_kustomize(DASHBOARD, tmp_path / "overlay")
    every = Installation(repo=REPO, image=IMAGE, receiver=True, queues=True, dashboard=True)
    assert render(every) == kubectl_kustomize(every, tmp_path / "every")


def test_the_dashboard_runs_the_image_with_the_installations_settings() -> None:
    objects = {(o["kind"], o["metadata"]["name"]): o for o in render(DASHBOARD)}
    deployment = objects["Deployment", "mxgitops-dashboard"]
    assert deployment["metadata"]["namespace"] == "ml-gitops"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == IMAGE
    (config,) = [name for kind, name in objects if kind == "ConfigMap"]
    assert config.startswith(f"{CONFIG_MAP}-")
    assert container["envFrom"] == [{"configMapRef": {"name": config}}]
    assert objects["Service", "mxgitops-dashboard"]["metadata"]["namespace"] == "ml-gitops"
    without = render(Installation(repo=REPO, image=IMAGE))
    assert "Deployment" not in {o["kind"] for o in without}


def test_the_export_holds_the_dashboard(tmp_path: Path) -> None:
    args = ["install", "--export", "--repo", REPO, "--image", IMAGE, "--dashboard"]
    result = CliRunner().invoke(main, [*args, "--namespace", "ml-gitops"])
    assert result.exit_code == ExitCode.OK, result.output
    assert list(yaml.safe_load_all(result.stdout)) == render(DASHBOARD)
