"""`accelerators` is the operator's: its host-path volumes are exempt from the policy,
so a jobs repository that could set them could mount any host path into every GPU
container. `.mxgitops.yaml` gets the operator-only error; the operator passes them in
a file (`--accelerators-file`, MXGITOPS_ACCELERATORS_FILE)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.errors import ConfigError
from mxgitops.settings.config import SyncConfig, apply_repo_settings, from_options

ROOT_MOUNT = """\
accelerators:
  nvidia.com/gpu:
    volumes:
      - {name: root, hostPath: /, mountPath: /host}
"""
DRIVERS = """\
accelerators:
  nvidia.com/gpu:
    volumes:
      - {name: nvidia-libs, hostPath: /usr/lib/nvidia, mountPath: /usr/local/nvidia/lib64}
    envVars:
      - {name: LD_LIBRARY_PATH, value: /usr/local/nvidia/lib64}
"""


def test_a_repository_that_sets_accelerators_gets_the_operator_only_error(
    tmp_path: Path,
) -> None:
    (tmp_path / ".mxgitops.yaml").write_text("path: .\n" + ROOT_MOUNT)
    config, refused = apply_repo_settings(SyncConfig(), set(), tmp_path)
    assert config.accelerators == {}
    (problem,) = refused
    assert (problem.file, problem.line, problem.field) == (".mxgitops.yaml", 2, "accelerators")
    assert problem.message.startswith(
        "only the operator may set this (--accelerators-file or MXGITOPS_ACCELERATORS_FILE"
    )


def test_the_operator_sets_them_in_a_file(tmp_path: Path) -> None:
    operator = tmp_path / "accelerators.yaml"
    operator.write_text(DRIVERS)
    config = from_options({"accelerators_file": operator})
    assert config.accelerators["nvidia.com/gpu"]["volumes"][0]["hostPath"] == "/usr/lib/nvidia"
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / ".mxgitops.yaml").write_text(ROOT_MOUNT)
    config, refused = apply_repo_settings(config, set(), tmp_path / "repo")
    assert config.accelerators["nvidia.com/gpu"]["volumes"][0]["hostPath"] == "/usr/lib/nvidia"
    assert [p.field for p in refused] == ["accelerators"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nvidia.com/gpu: {}\n", "must be one YAML mapping with a single key, accelerators"),
        ("accelerators: []\n", "accelerators: expected a mapping"),
        ("accelerators:\n  x: {volumes: 1}\n", "accelerators['x']"),
    ],
)
def test_a_bad_accelerators_file_is_a_configuration_error(
    tmp_path: Path, text: str, message: str
) -> None:
    operator = tmp_path / "accelerators.yaml"
    operator.write_text(text)
    with pytest.raises(ConfigError, match=r"^accelerators file .*") as caught:
        SyncConfig(accelerators_file=operator)
    assert message in str(caught.value)
    with pytest.raises(ConfigError, match="cannot read"):
        SyncConfig(accelerators_file=tmp_path / "missing.yaml")


def test_the_flag_and_its_variable_are_listed() -> None:
    shown = CliRunner().invoke(main, ["sync", "--help"]).output
    assert "--accelerators-file" in shown and "MXGITOPS_ACCELERATORS_FILE" in shown
