"""jobs-repo-example stands alone: its manifests' `$schema` lines point at copies kept in
the repository itself (the same files as this release's schemas/), and the pre-commit
hook of this repository validates it as `mxgitops validate` does."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from mxgitops.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "jobs-repo-example"
SCHEMA_LINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)$")


@pytest.mark.parametrize("manifest", sorted(EXAMPLE.glob("jobs/**/*.yaml")), ids=lambda p: p.name)
def test_the_schema_line_works_in_a_standalone_jobs_repository(manifest: Path) -> None:
    match = SCHEMA_LINE.match(manifest.read_text().splitlines()[0])
    assert match, f"{manifest.name}: no $schema line"
    target = (manifest.parent / match.group(1)).resolve()
    assert target.is_relative_to(EXAMPLE), f"{manifest.name} points outside the jobs repository"
    # A copy of this release's schema: refresh it with `cp schemas/NAME jobs-repo-example/schemas/`.
    assert target.read_bytes() == (ROOT / "schemas" / target.name).read_bytes(), target.name


def test_the_pre_commit_hook_validates_the_example(monkeypatch: pytest.MonkeyPatch) -> None:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["language"] == "python" and hook["pass_filenames"] is False
    program, *args = hook["entry"].split()
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts[program] == "mxgitops.cli:main"
    assert re.search(hook["files"], "jobs/vision/cifar10-local.yaml")
    monkeypatch.chdir(EXAMPLE)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert result.output == "3 jobs valid, 0 invalid manifests, 0 problems, 0 documents ignored\n"
