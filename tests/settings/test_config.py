"""config: SyncConfig from given options and the jobs repository's .mxgitops.yaml."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mxgitops.errors import ConfigError
from mxgitops.settings import config as config_module
from mxgitops.settings.config import (
    SyncConfig,
    apply_repo_settings,
    from_options,
    read_repo_settings,
)


def repo_file(tmp_path: Path, text: str) -> Path:
    (tmp_path / ".mxgitops.yaml").write_text(text)
    return tmp_path


def test_options_left_out_keep_their_defaults() -> None:
    config = from_options({"namespace": "ml", "instance": None, "parallelism": 4})
    assert (config.namespace, config.instance, config.parallelism) == ("ml", "default", 4)


def test_the_file_fills_in_only_what_flags_and_environment_left_unset(tmp_path: Path) -> None:
    root = repo_file(tmp_path, "namespace: from-file\npath: jobs\nprune: false\n")
    config = apply_repo_settings(SyncConfig(namespace="from-flag"), {"namespace"}, root)[0]
    assert (config.namespace, config.path, config.prune) == ("from-flag", "jobs", False)
    assert apply_repo_settings(SyncConfig(), set(), tmp_path / "none")[0] == SyncConfig()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("namespace: [unclosed", ".mxgitops.yaml: not valid YAML"),
        ("- a list", ".mxgitops.yaml: must be a mapping of settings"),
        ("nmespace: ml", ".mxgitops.yaml:1: 'nmespace': not a setting of the jobs repository"),
        ("prune: 1", ".mxgitops.yaml: prune: expected true or false, got 1"),
        ("path: [jobs]", ".mxgitops.yaml: path: expected a string, got ['jobs']"),
        ("namespace: Bad_NS", "namespace 'Bad_NS' is not a valid namespace name"),
        ("cancel: {}", ".mxgitops.yaml: cancel: expected a list, got {}"),
    ],
)
def test_bad_settings_are_named_with_their_file_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        apply_repo_settings(SyncConfig(), set(), repo_file(tmp_path, text))
    assert str(caught.value).startswith(message)


def test_an_empty_file_sets_nothing(tmp_path: Path) -> None:
    assert read_repo_settings(repo_file(tmp_path, "")).values == {}


def test_unknown_options_and_invalid_values_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown settings: colour"):
        from_options({"colour": "blue"})
    with pytest.raises(ConfigError, match="parallelism must be between 1 and 256"):
        SyncConfig(parallelism=0)
    with pytest.raises(ConfigError, match="at most 47 characters"):
        SyncConfig(instance="a" * 48)


def test_a_token_never_shows_in_the_repr() -> None:
    config = SyncConfig(repo="https://user:s3cr3t@host/jobs.git", git_token="t0ken")
    assert "s3cr3t" not in repr(config) and "t0ken" not in repr(config)


# -- a jobs repository cannot change who mxgitops is (issue 13) ------------------------


@pytest.mark.parametrize(
    ("text", "key", "kept"),
    [
        ("instance: team-b\n", "instance", ("instance", "default")),
        ("maxPruneShare: 1\n", "maxPruneShare", ("max_prune_share", 0.5)),
        ("parallelism: 300000000\n", "parallelism", ("parallelism", 16)),
        ("maxFileSize: 0\n", "maxFileSize", ("max_file_size", 1024 * 1024)),
        ("notesRef: refs/heads/main\n", "notesRef", ("notes_ref", "refs/notes/mxgitops")),
        ("notes: false\n", "notes", ("notes", True)),
        ("stateNamespace: kube-system\n", "stateNamespace", ("state_namespace", "default")),
        ("accelerators: {x: {}}\n", "accelerators", ("accelerators", {})),
    ],
)
def test_operator_settings_in_the_repository_are_refused_and_ignored(
    tmp_path: Path, text: str, key: str, kept: tuple[str, object]
) -> None:
    config, refused = apply_repo_settings(
        SyncConfig(), set(), repo_file(tmp_path, "path: .\n" + text)
    )
    attribute, value = kept
    assert getattr(config, attribute) == value
    (problem,) = refused
    assert (problem.file, problem.line, problem.field) == (".mxgitops.yaml", 2, key)
    assert "only the operator" in problem.message and "MXGITOPS_" in problem.message


def test_team_a_cannot_take_team_b_s_identity(tmp_path: Path) -> None:
    root = repo_file(tmp_path, "instance: team-b\nmaxPruneShare: 1\nnamespace: ml\n")
    operator = SyncConfig(instance="team-a", max_prune_share=0.2)
    config, refused = apply_repo_settings(operator, {"instance"}, root)
    assert (config.instance, config.max_prune_share, config.namespace) == ("team-a", 0.2, "ml")
    assert [p.field for p in refused] == ["instance", "maxPruneShare"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"parallelism": 300_000_000}, "parallelism must be between 1 and 256"),
        ({"parallelism": 0}, "parallelism must be between 1 and 256"),
        ({"max_file_size": 0}, "max-file-size must be between 1 KiB and 64 MiB"),
        ({"max_file_size": 1 << 40}, "max-file-size must be between 1 KiB and 64 MiB"),
        ({"max_prune_share": -0.1}, "max-prune-share must be between 0 and 1"),
        ({"state_namespace": "Kube_System"}, "state namespace 'Kube_System' is not a valid"),
    ],
)
def test_every_numeric_setting_has_bounds(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SyncConfig(**settings)


@pytest.mark.parametrize(
    ("depth", "message"),
    [(20, "nested more than 16 levels deep"), (20_000, "exceeded maximum nesting depth")],
)
def test_deep_nesting_is_a_clear_error_not_a_crash(
    tmp_path: Path, depth: int, message: str
) -> None:
    root = repo_file(tmp_path, "accelerators: " + "[" * depth + "]" * depth + "\n")
    with pytest.raises(ConfigError, match=re.escape(f"not valid YAML (line 1): {message}")):
        read_repo_settings(root)


def test_an_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    with pytest.raises(ConfigError, match="expands to more than"):
        read_repo_settings(repo_file(tmp_path, "\n".join(lines) + "\n"))


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ('"jobs\\0evil"', "path: must not contain a NUL byte"),
        ("/etc", "path: must be relative to the repository root"),
        ("jobs/../../x", "path: must stay inside the repository (no '..')"),
    ],
)
def test_a_bad_path_is_a_clear_error(tmp_path: Path, path: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f".mxgitops.yaml:1: {message}")):
        read_repo_settings(repo_file(tmp_path, f"path: {path}\n"))


def test_a_symlink_out_of_the_repository_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text("password: hunter2-s3cr3t\n")
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".mxgitops.yaml").symlink_to(secret)
    with pytest.raises(ConfigError) as caught:
        read_repo_settings(root)
    assert "symlink" in str(caught.value) and "outside the repository" in str(caught.value)
    assert "hunter2" not in str(caught.value) and "password" not in str(caught.value)


def test_a_symlink_inside_the_repository_is_read(tmp_path: Path) -> None:
    (tmp_path / "settings.yaml").write_text("namespace: ml\n")
    (tmp_path / ".mxgitops.yaml").symlink_to("settings.yaml")
    assert read_repo_settings(tmp_path).values == {"namespace": "ml"}


def test_a_file_too_big_or_not_regular_is_refused(tmp_path: Path) -> None:
    repo_file(tmp_path, "# padding\n" * 10_000)
    with pytest.raises(ConfigError, match="over the limit of 64 KiB"):
        read_repo_settings(tmp_path)
    (tmp_path / ".mxgitops.yaml").unlink()
    (tmp_path / ".mxgitops.yaml").mkdir()
    with pytest.raises(ConfigError, match="not a regular file"):
        read_repo_settings(tmp_path)


def test_several_documents_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="one YAML document"):
        read_repo_settings(repo_file(tmp_path, "path: a\n---\npath: b\n"))


# -- the state namespace: operator only, the pod's own namespace by default -------------


def test_the_state_namespace_is_the_pods_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_dir = tmp_path / "serviceaccount"
    token_dir.mkdir()
    (token_dir / "namespace").write_text("mxgitops-system")
    monkeypatch.setattr(config_module, "SERVICE_ACCOUNT_NAMESPACE", token_dir / "namespace")
    assert from_options({}).state_namespace == "mxgitops-system"
    # The jobs' default namespace is another setting: it does not move the state.
    both = from_options({"namespace": "ml"})
    assert (both.namespace, both.state_namespace) == ("ml", "mxgitops-system")
    assert from_options({"state_namespace": "ops"}).state_namespace == "ops"


def test_outside_a_pod_the_state_namespace_is_the_operators_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config_module, "SERVICE_ACCOUNT_NAMESPACE", tmp_path / "absent")
    assert from_options({}).state_namespace == "default"
    assert from_options({"namespace": "ml"}).state_namespace == "ml"
    # ...and never the jobs repository's namespace.
    root = repo_file(tmp_path, "namespace: from-repo\n")
    config = apply_repo_settings(from_options({"namespace": "ml"}), {"namespace"}, root)[0]
    assert config.state_namespace == "ml"
    config = apply_repo_settings(from_options({}), set(), root)[0]
    assert (config.namespace, config.state_namespace) == ("from-repo", "default")


# -- a misspelled key, and the keys told the same everywhere (issue 34) ---------------


def test_a_misspelled_key_is_named_with_its_line_and_what_was_meant(tmp_path: Path) -> None:
    root = repo_file(tmp_path, "namespace: ml\n\ncancle:\n  - ml/old\n")
    with pytest.raises(ConfigError) as caught:
        apply_repo_settings(SyncConfig(), set(), root)
    assert str(caught.value) == (
        ".mxgitops.yaml:3: 'cancle': not a setting of the jobs repository; did you mean "
        "'cancel'? (allowed: path, namespace, prune, policy, cancel)"
    )


def test_the_repository_keys_are_the_same_in_help_error_and_example() -> None:
    from click.testing import CliRunner

    from mxgitops.cli import main
    from mxgitops.manifests.repofile import REPO_SETTINGS

    example = (Path(__file__).resolve().parents[2] / "jobs-repo-example/.mxgitops.yaml").read_text()
    shown = " ".join(CliRunner().invoke(main, ["sync", "--help"]).output.split())
    for key in REPO_SETTINGS:
        assert f"{key}:" in example, key
        assert f"`{key}`" in shown or f" {key}," in shown or f" {key} " in shown, key
