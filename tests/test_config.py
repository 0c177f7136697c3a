"""config: SyncConfig from given options and the jobs repository's .mxgitops.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from mxgitops.config import SyncConfig, from_options, read_repo_config, with_repo_file
from mxgitops.errors import ConfigError


def repo_file(tmp_path: Path, text: str) -> Path:
    (tmp_path / ".mxgitops.yaml").write_text(text)
    return tmp_path


def test_options_left_out_keep_their_defaults() -> None:
    config = from_options({"namespace": "ml", "instance": None, "parallelism": 4})
    assert (config.namespace, config.instance, config.parallelism) == ("ml", "default", 4)


def test_the_file_fills_in_only_what_flags_and_environment_left_unset(tmp_path: Path) -> None:
    root = repo_file(tmp_path, "namespace: from-file\ninstance: team-a\nmaxPruneShare: 1\n")
    config = with_repo_file(SyncConfig(namespace="from-flag"), {"namespace"}, root)
    assert (config.namespace, config.instance, config.max_prune_share) == (
        "from-flag",
        "team-a",
        1.0,
    )
    assert with_repo_file(SyncConfig(), set(), tmp_path / "none") == SyncConfig()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("namespace: [unclosed", ".mxgitops.yaml: not valid YAML"),
        ("- a list", ".mxgitops.yaml: must be a mapping of settings"),
        ("repo: https://elsewhere", ".mxgitops.yaml: repo: not a setting of the jobs repository"),
        ("prune: 1", ".mxgitops.yaml: prune: expected true or false, got 1"),
        ("parallelism: true", ".mxgitops.yaml: parallelism: expected a whole number, got True"),
        ("namespace: Bad_NS", "namespace 'Bad_NS' is not a valid namespace name"),
        ("instance: has space", "instance 'has space' must be lower-case letters"),
        ("maxPruneShare: 3", "max-prune-share must be between 0 and 1, not 3.0"),
    ],
)
def test_bad_settings_are_named_with_their_file_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        with_repo_file(SyncConfig(), set(), repo_file(tmp_path, text))
    assert str(caught.value).startswith(message)


def test_an_empty_file_sets_nothing(tmp_path: Path) -> None:
    assert read_repo_config(repo_file(tmp_path, "")) == {}


def test_unknown_options_and_invalid_values_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown settings: colour"):
        from_options({"colour": "blue"})
    with pytest.raises(ConfigError, match="parallelism must be at least 1"):
        SyncConfig(parallelism=0)
    with pytest.raises(ConfigError, match="at most 47 characters"):
        SyncConfig(instance="a" * 48)


def test_a_token_never_shows_in_the_repr() -> None:
    config = SyncConfig(repo="https://user:s3cr3t@host/jobs.git", git_token="t0ken")
    assert "s3cr3t" not in repr(config) and "t0ken" not in repr(config)
