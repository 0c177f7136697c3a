"""The published image is named once (mxgitops/install/__init__.py's PUBLISHED_IMAGE):
install runs that image at its own version by default, the release workflow pushes that
name for amd64 and arm64 with an SBOM and provenance, and the manual states it."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from mxgitops import __version__
from mxgitops.cli import main
from mxgitops.install import PUBLISHED_IMAGE

ROOT = Path(__file__).resolve().parents[2]


def test_install_runs_its_own_versions_published_image_by_default() -> None:
    out = CliRunner().invoke(main, ["install", "--repo", "https://x/j.git", "--export"]).stdout
    (cronjob,) = [d for d in yaml.safe_load_all(out) if d["kind"] == "CronJob"]
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{PUBLISHED_IMAGE}:{__version__}"


def test_the_release_workflow_pushes_that_name_for_both_architectures() -> None:
    workflow = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    steps = workflow["jobs"]["image"]["steps"]
    (build,) = [s for s in steps if s.get("uses", "").startswith("docker/build-push-action")]
    assert build["with"]["tags"] == PUBLISHED_IMAGE + ":${{ env.VERSION }}"
    assert build["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert build["with"]["sbom"] is True and build["with"]["provenance"] == "mode=max"
    assert workflow[True] == {"push": {"tags": ["v*.*.*"]}}  # YAML 1.1 reads `on` as True


def test_the_manual_states_it() -> None:
    page = (ROOT / "docs/getting-started/cluster.md").read_text()
    assert f"`{PUBLISHED_IMAGE}:<version>`" in page
