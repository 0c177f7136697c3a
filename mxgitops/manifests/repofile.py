"""The jobs repository's `.mxgitops.yaml`: what a repository may say about its jobs.

The file comes from whoever can merge into the jobs repository, so it is read
like a manifest: through the bounded YAML loader (`yamldoc`: no recursion,
nesting and alias expansion capped), at most 64 KiB, only as a regular file,
and never through a symlink that leads out of the repository (whose target
could be a secret of the machine, and would end up quoted in an error).

It may set what describes its jobs (`REPO_SETTINGS`). Everything that decides
who mxgitops is or what it may do (its instance, the namespace of its Lease
and ledger, prune limits, parallelism, file-size limits, notes, credentials,
and the accelerators' host-path mounts, which the policy exempts:
`OPERATOR_SETTINGS`) belongs to the operator: a repository that
sets one gets a `Problem`, reported by validate, diff and the status note
like an invalid manifest, and its value is ignored. Anything else is a typo
or a malformed file: a `ConfigError`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from mxgitops.errors import ConfigError
from mxgitops.manifests import policy
from mxgitops.manifests.files import Problem, read_text
from mxgitops.manifests.yamldoc import Document, YamlError, documents
from mxgitops.words import did_you_mean

REPO_CONFIG_FILE = ".mxgitops.yaml"
MAX_SIZE = 64 * 1024
MAX_VALUES = 10_000
MAX_DEPTH = 16
MAX_PATH_LENGTH = 1024

# Key of .mxgitops.yaml -> (SyncConfig field, the type its value must have).
REPO_SETTINGS: dict[str, tuple[str, type]] = {
    "path": ("path", str),
    "namespace": ("namespace", str),
    "prune": ("prune", bool),
    "policy": ("repo_policy", dict),  # can only make the operator's policy stricter
    "cancel": ("cancel", list),  # removed jobs pruned at once, even with on-change: wait
}

# Key an operator might expect here -> the flag that sets it ("" when env only).
OPERATOR_SETTINGS: dict[str, str] = {
    "instance": "--instance",
    "stateNamespace": "--state-namespace",
    "maxPruneShare": "--max-prune-share",
    "maxDisruptionRuns": "--max-disruption-runs",
    "forcePrune": "--force-prune",
    "parallelism": "--parallelism",
    "maxFileSize": "--max-file-size",
    "notes": "--notes",
    "notesRef": "--notes-ref",
    "repo": "--repo",
    "ref": "--ref",
    "cacheDir": "--cache-dir",
    "kubeconfig": "--kubeconfig",
    "context": "--context",
    "sshKey": "--ssh-key",
    "knownHosts": "--known-hosts",
    "gitToken": "",
    "policyFile": "--policy-file",
    "tenancy": "--tenant-service-account",
    # Host-path volumes and mounts in every container that requests a resource, exempt
    # from the policy (the node's driver libraries): a repository could mount any path.
    "accelerators": "--accelerators-file",
    # Where results go, and the credential to post them: the operator's, or a pull
    # request could send its statuses, Events or metrics elsewhere.
    "statusProvider": "--status-provider",
    "statusApiUrl": "--status-api-url",
    "statusRepository": "--status-repository",
    "statusUrl": "--status-url",
    "statusToken": "",
    "statusTokenFile": "--status-token-file",
    "statusTimeout": "--status-timeout",
    "events": "--events",
    "notifications": "--notifications-file",
    "notificationsFile": "--notifications-file",
    "pushgateway": "--pushgateway",
}


@dataclass(frozen=True)
class RepoFile:
    """What `.mxgitops.yaml` sets (SyncConfig field -> value) and what it may not set."""

    values: dict[str, Any] = field(default_factory=dict)
    refused: tuple[Problem, ...] = ()


def read(root: Path) -> RepoFile:
    """Read `root/.mxgitops.yaml`; no file sets nothing. Raise ConfigError when it is unusable."""
    path = root / REPO_CONFIG_FILE
    if not path.is_symlink() and not path.exists():
        return RepoFile()
    if not Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root)):
        raise ConfigError(f"{REPO_CONFIG_FILE}: a symlink to outside the repository; not followed")
    try:
        text = read_text(path, MAX_SIZE)
    except YamlError as error:
        raise ConfigError(f"{REPO_CONFIG_FILE}: {error.message.split(' (see ')[0]}") from error
    try:
        docs = list(documents(text, max_values=MAX_VALUES, max_depth=MAX_DEPTH))
    except YamlError as error:
        message = error.message.removeprefix("invalid YAML: ")
        where = f" (line {error.line})" if error.line else ""
        raise ConfigError(f"{REPO_CONFIG_FILE}: not valid YAML{where}: {message}") from error
    if len(docs) > 1:
        raise ConfigError(f"{REPO_CONFIG_FILE}: must be one YAML document, not {len(docs)}")
    if not docs or docs[0].data is None:
        return RepoFile()
    return _settings(docs[0])


def _settings(doc: Document) -> RepoFile:
    for issue in doc.problems:
        raise ConfigError(f"{REPO_CONFIG_FILE}:{doc.line_for(issue)}: {issue.message}")
    if not isinstance(doc.data, dict):
        raise ConfigError(f"{REPO_CONFIG_FILE}: must be a mapping of settings")
    values: dict[str, Any] = {}
    refused: list[Problem] = []
    for key, value in doc.data.items():
        line = doc.line_of((key,))
        if key in OPERATOR_SETTINGS:
            refused.append(Problem(REPO_CONFIG_FILE, line, None, key, _operator_only(key)))
            continue
        if key not in REPO_SETTINGS:
            raise ConfigError(
                f"{REPO_CONFIG_FILE}:{line}: {_quoted(key)}: not a setting of the jobs "
                f"repository{_meant(key)} (allowed: {', '.join(REPO_SETTINGS)})"
            )
        attribute, expected = REPO_SETTINGS[key]
        if not isinstance(value, expected):
            raise ConfigError(
                f"{REPO_CONFIG_FILE}: {key}: expected {_TYPE_NAMES[expected]}, got {_quoted(value)}"
            )
        if isinstance(value, str) and key == "path":
            _check_path(value, line)
        if key == "policy":
            where = f"{REPO_CONFIG_FILE}:{line}: policy"
            value = policy.parse(value, where=where, source=policy.REPOSITORY)
        if key == "cancel":
            value = _cancelled(value, line)
        values[attribute] = value
    return RepoFile(values, tuple(refused))


def _meant(key: Any) -> str:
    """ "; did you mean 'cancel'?" for a key close to one this file may set."""
    return did_you_mean(key, REPO_SETTINGS)


def _cancelled(value: list[Any], line: int) -> tuple[str, ...]:
    """`cancel`: the jobs, as namespace/name, whose removal waits for nothing."""
    for item in value:
        namespace, _, name = item.partition("/") if isinstance(item, str) else ("", "", "")
        if not (namespace and name) or "/" in name:
            raise ConfigError(
                f"{REPO_CONFIG_FILE}:{line}: cancel: each entry is namespace/name, "
                f"not {_quoted(item)}"
            )
    return tuple(value)


def _operator_only(key: str) -> str:
    flag = OPERATOR_SETTINGS[key]
    env = "MXGITOPS_" + (flag.lstrip("-").replace("-", "_").upper() if flag else "GIT_TOKEN")
    how = f"{flag} or {env}" if flag else env
    return (
        f"only the operator may set this ({how}, e.g. in the CronJob's ConfigMap): a jobs "
        "repository cannot change who mxgitops is or what it may do; the value is ignored"
    )


def _check_path(path: str, line: int) -> None:
    where = f"{REPO_CONFIG_FILE}:{line}: path"
    if "\0" in path:
        raise ConfigError(f"{where}: must not contain a NUL byte")
    if len(path) > MAX_PATH_LENGTH:
        raise ConfigError(f"{where}: longer than {MAX_PATH_LENGTH} characters")
    if path.startswith("/"):
        raise ConfigError(f"{where}: must be relative to the repository root, not {path!r}")
    if ".." in PurePosixPath(path).parts:
        raise ConfigError(f"{where}: must stay inside the repository (no '..')")


_TYPE_NAMES: dict[type, str] = {
    bool: "true or false",
    str: "a string",
    dict: "a mapping",
    list: "a list",
}


def _quoted(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
