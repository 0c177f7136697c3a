"""The manifests of a jobs repository, read the way a sync reads them: said once.

`sync`, `check`, `validate`, `render` and `diff` must agree on every job and every
problem, down to the file names in messages, or a pull request that validates on a
laptop fails in the cluster. What shapes the reading is a `Reading`: the manifests'
directory, the default namespace, the file-size bound, the policy (the operator's
made stricter by the repository's) and the default runtime, each the flag's value
over `.mxgitops.yaml`'s over the built-in default, and what `.mxgitops.yaml` may not
set, reported first among the problems. A sync takes it from its `SyncConfig`
(`of_config`); the laptop commands, which take no `SyncConfig` (its checks would turn
a job's bad namespace into an error of the command), from their flags
(`of_flags`). `load_repository` then reads the one directory it names, and refuses
one that leads out of the repository.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from mxgitops.errors import ConfigError
from mxgitops.manifests import loading
from mxgitops.manifests import policy as rules
from mxgitops.manifests.files import MAX_FILE_SIZE, Problem
from mxgitops.manifests.loading import LoadResult, Verdicts
from mxgitops.manifests.repofile import REPO_CONFIG_FILE, RepoFile
from mxgitops.model import DEFAULT_RUNTIME, NAMESPACE
from mxgitops.settings.config import SyncConfig, effective_policy

if TYPE_CHECKING:
    from mxgitops.source.repository import Repository


@dataclass(frozen=True)
class Reading:
    """What shapes the reading of a repository's manifests (see the module's docstring)."""

    path: str = "."
    namespace: str = NAMESPACE
    policy: rules.Policy | None = None
    max_file_size: int = MAX_FILE_SIZE
    default_runtime: str = DEFAULT_RUNTIME
    refused: tuple[Problem, ...] = ()  # what .mxgitops.yaml may not set

    def shaping(self) -> tuple[object, ...]:
        """What a file's verdict depends on besides its name and text (`loadcache`)."""
        return (
            self.path,
            self.namespace,
            self.max_file_size,
            repr(self.policy),
            self.default_runtime,
        )


def of_config(config: SyncConfig, refused: tuple[Problem, ...] = ()) -> Reading:
    """The reading of a sync: `config` with .mxgitops.yaml applied (`apply_repo_settings`)."""
    return Reading(
        path=config.path,
        namespace=config.namespace,
        policy=effective_policy(config),
        max_file_size=config.max_file_size,
        default_runtime=config.default_runtime,
        refused=refused,
    )


def of_flags(
    repo_file: RepoFile,
    *,
    path: str | None,
    namespace: str | None,
    policy_file: Path | None,
    max_file_size: int = MAX_FILE_SIZE,
    default_runtime: str | None = None,
) -> Reading:
    """The reading of a laptop command: its flags (None: not given) over `repo_file`."""
    values = repo_file.values
    repo_policy = values.get("repo_policy", {})
    return Reading(
        path=path or values.get("path", "."),
        namespace=namespace or values.get("namespace", NAMESPACE),
        policy=effective_policy(SyncConfig(policy_file=policy_file, repo_policy=repo_policy)),
        max_file_size=max_file_size,
        default_runtime=default_runtime or DEFAULT_RUNTIME,
        refused=repo_file.refused,
    )


def load_repository(
    root: Path,
    reading: Reading,
    *,
    paths: Sequence[str | Path] = (),
    verdicts: Verdicts | None = None,
    rev: str | None = None,
) -> LoadResult:
    """The manifests of the repository at `root`, under `reading.path`, or under `paths`
    (validate's arguments, named as given) instead. A file whose verdict is in
    `verdicts` is not validated again. With `rev` (a commit written out by diff), a
    commit without the directory has no jobs (e.g. the first one); otherwise a
    missing directory is a ConfigError."""
    roots: list[str | Path] = list(paths)
    if not paths:
        target = manifest_dir(root, reading.path, rev=rev)
        roots = [target] if rev is None or target.exists() else []
    loaded = loading.load(
        roots,
        default_namespace=reading.namespace,
        max_file_size=reading.max_file_size,
        policy=reading.policy,
        verdicts=verdicts,
        default_runtime=reading.default_runtime,
        named_from="." if paths else reading.path,
    )
    if not reading.refused:
        return loaded
    return replace(loaded, problems=[*reading.refused, *loaded.problems])


def repository_of_paths(paths: Sequence[str]) -> tuple[Path, tuple[str, ...]]:
    """The jobs repository a laptop command's PATHS are in, and the PATHS to read there.

    The repository is the nearest directory at or above the first PATH that holds a
    `.mxgitops.yaml`, looked for up to the top of its checkout (the directory holding
    `.git`); where there is none, the current directory, whose `.mxgitops.yaml` (if
    any) applies. A PATH that is the repository itself is read as a sync reads it:
    its `path:` (no PATHS left). PATHS in two repositories are a ConfigError: each has
    its own settings."""
    if not paths:
        return Path("."), ()
    roots = {path: _settings_root(Path(path)) for path in paths}
    found = {root for root in roots.values() if root is not None}
    if len(found) > 1:
        named = "; ".join(f"{path} in {root}" for path, root in roots.items() if root)
        raise ConfigError(f"the paths are in different jobs repositories ({named}): one at a time")
    if not found:
        return Path("."), tuple(paths)
    (root,) = found
    if any(Path(path).resolve() == root for path in paths):
        return root, ()
    return root, tuple(paths)


def _settings_root(path: Path) -> Path | None:
    """The nearest directory at or above `path` holding a `.mxgitops.yaml`, not above
    its checkout's top; None if there is none."""
    start = path.resolve()
    for directory in [start, *start.parents] if start.is_dir() else start.parents:
        if (directory / REPO_CONFIG_FILE).is_file():
            return directory
        if (directory / ".git").exists():
            return None
    return None


def manifest_dir(root: Path, path: str, *, rev: str | None = None) -> Path:
    """The directory of the manifests, `path` of the repository at `root` (written out
    from commit `rev`, where it may be absent), symlinks resolved."""
    target = Path(os.path.realpath(root / path))
    if not target.is_relative_to(os.path.realpath(root)):
        at = f" at {rev}" if rev else ""
        raise ConfigError(f"path {path!r} leaves the jobs repository{at}; nothing is read")
    if rev is None and not target.exists():
        raise ConfigError(f"path {path!r} does not exist in the jobs repository")
    return target


def repository_of(config: SyncConfig) -> Repository:
    """The cache clone of `config.repo` with the settings' credentials and deadline, as
    every command that reads the jobs repository's history opens it. Git is imported
    here, not with the module: validating a file needs none of it."""
    from mxgitops.source import gitauth
    from mxgitops.source import repository as source

    credentials = gitauth.Credentials(config.git_token, config.ssh_key, config.known_hosts)
    return source.Repository(
        config.repo,
        cache_dir=config.cache_dir,
        credentials=credentials,
        timeout=config.request_timeout,
    )
