"""SyncConfig: one value built from flags, MXGITOPS_* environment and .mxgitops.yaml.

Precedence is flags over environment over the jobs repository's
`.mxgitops.yaml` over built-in defaults. Click resolves flags and
environment (every option has an `MXGITOPS_*` envvar) and tells which
values were left at their default; the file is read only after the
repository is checked out, so it cannot choose the repository, the ref,
the cache or the cluster credentials.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, cast

import yaml

from mxgitops.cluster import DEFAULT_PARALLELISM, DEFAULT_REQUEST_TIMEOUT, MAX_REQUEST_TIMEOUT
from mxgitops.errors import ConfigError
from mxgitops.plan import DEFAULT_MAX_PRUNE_SHARE
from mxgitops.spec import MAX_NAME_LENGTH, NAMESPACE, is_dns1123_label

REPO_CONFIG_FILE = ".mxgitops.yaml"
MAX_INSTANCE_LENGTH = MAX_NAME_LENGTH - len("mxgitops-ledger-")
DEFAULT_NOTES_REF = "refs/notes/mxgitops"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mxgitops"


@dataclass(frozen=True)
class SyncConfig:
    repo: str = field(default=".", repr=False)  # a URL may embed a token
    ref: str | None = None
    path: str = "."
    namespace: str = NAMESPACE
    instance: str = "default"
    kubeconfig: Path | None = None
    context: str | None = None
    prune: bool = True
    max_prune_share: float = DEFAULT_MAX_PRUNE_SHARE
    force_prune: bool = False
    dry_run: bool = False
    notes: bool = True
    notes_ref: str = DEFAULT_NOTES_REF
    cache_dir: Path = field(default_factory=default_cache_dir)
    parallelism: int = DEFAULT_PARALLELISM
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT  # seconds per API call, retries included
    output: str = "text"
    log_format: str = "text"
    verbose: int = 0  # -1 quiet, 0 normal, 1 verbose
    ssh_key: Path | None = None
    known_hosts: Path | None = None
    git_token: str | None = field(default=None, repr=False)
    max_file_size: int = 1024 * 1024
    accelerators: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.parallelism < 1:
            raise ConfigError(f"parallelism must be at least 1, not {self.parallelism}")
        if not 0 < self.request_timeout <= MAX_REQUEST_TIMEOUT:
            raise ConfigError(
                f"request-timeout must be more than 0 and at most {MAX_REQUEST_TIMEOUT:g} "
                f"seconds, not {self.request_timeout}"
            )
        if not 0 <= self.max_prune_share <= 1:
            raise ConfigError(
                f"max-prune-share must be between 0 and 1, not {self.max_prune_share}"
            )
        if not is_dns1123_label(self.namespace):
            raise ConfigError(
                f"namespace {self.namespace!r} is not a valid namespace name "
                "(lower-case letters, digits and '-', at most 63 characters)"
            )
        # The instance names the Lease (mxgitops-…) and the ledger (mxgitops-ledger-…)
        # and is a label value: a DNS-1123 label short enough for both names.
        if not is_dns1123_label(self.instance, MAX_INSTANCE_LENGTH):
            raise ConfigError(
                f"instance {self.instance!r} must be lower-case letters, digits and '-', "
                f"at most {MAX_INSTANCE_LENGTH} characters"
            )


# Keys of .mxgitops.yaml -> SyncConfig field, with the type a value must have.
REPO_CONFIG_KEYS: dict[str, tuple[str, type | tuple[type, ...]]] = {
    "path": ("path", str),
    "namespace": ("namespace", str),
    "instance": ("instance", str),
    "prune": ("prune", bool),
    "maxPruneShare": ("max_prune_share", (int, float)),
    "notes": ("notes", bool),
    "notesRef": ("notes_ref", str),
    "parallelism": ("parallelism", int),
    "maxFileSize": ("max_file_size", int),
    "accelerators": ("accelerators", dict),
}


def from_options(options: Mapping[str, Any]) -> SyncConfig:
    """A config from the options that were given (None = not given: keep the default)."""
    names = {f.name for f in fields(SyncConfig)}
    unknown = set(options) - names
    if unknown:
        raise ConfigError(f"unknown settings: {', '.join(sorted(unknown))}")
    return SyncConfig(**{k: v for k, v in options.items() if v is not None})


def with_repo_file(config: SyncConfig, explicit: set[str], root: Path) -> SyncConfig:
    """Fill in from the repository's .mxgitops.yaml what flags and environment left unset."""
    values = read_repo_config(root)
    return replace(config, **{k: v for k, v in values.items() if k not in explicit})


def read_repo_config(root: Path) -> dict[str, Any]:
    path = root / REPO_CONFIG_FILE
    if not path.is_file():
        return {}
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{REPO_CONFIG_FILE}: not valid YAML: {_first_line(exc)}") from exc
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{REPO_CONFIG_FILE}: must be a mapping of settings")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in REPO_CONFIG_KEYS:
            allowed = ", ".join(REPO_CONFIG_KEYS)
            raise ConfigError(
                f"{REPO_CONFIG_FILE}: {key}: not a setting of the jobs repository "
                f"(allowed: {allowed})"
            )
        attribute, expected = REPO_CONFIG_KEYS[key]
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ConfigError(
                f"{REPO_CONFIG_FILE}: {key}: expected {_type_name(expected)}, got {value!r}"
            )
        values[attribute] = float(cast(float, value)) if attribute == "max_prune_share" else value
    return values


def _type_name(expected: type | tuple[type, ...]) -> str:
    names = {
        bool: "true or false",
        str: "a string",
        int: "a whole number",
        dict: "a mapping",
        float: "a number",
    }
    if isinstance(expected, tuple):
        return "a number"
    return names.get(expected, expected.__name__)


def _first_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]
