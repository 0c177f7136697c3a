"""Options that several commands take, defined once as decorators.

A sync option's default lives in `SyncConfig` (`config.py`), so the option itself has
none: `_opt` gives it its `MXGITOPS_*` variable, and `config.from_options` fills in what
neither a flag nor the environment set.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import click

from mxgitops.kube.calls import MAX_REQUEST_TIMEOUT
from mxgitops.manifests.files import MAX_FILE_SIZE
from mxgitops.runtimes import registry
from mxgitops.settings.config import FILE_SIZE_BOUNDS

F = TypeVar("F", bound=Callable[..., Any])


def output_option(command: F) -> F:
    return click.option(
        "--output",
        "-o",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="Report format.",
    )(command)


def log_format_option(command: F) -> F:
    """The long-running commands' log format (sync's is a setting: `.mxgitops.yaml` too)."""
    return click.option(
        "--log-format",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        envvar="MXGITOPS_LOG_FORMAT",
        show_envvar=True,
        help="Log format on stderr; json gives one object per line.",
    )(command)


def namespace_option(command: F) -> F:
    return click.option(
        "--namespace",
        "-n",
        metavar="NAME",
        help="Namespace of jobs whose manifest names none.  [default: the namespace in "
        "the repository's .mxgitops.yaml, else default]",
    )(command)


if TYPE_CHECKING:
    _IntParamType = click.ParamType[int]
else:  # ParamType is generic only since click 8.2
    _IntParamType = click.ParamType


class ByteSize(_IntParamType):
    """A size in bytes: 1048576, 512KiB, 1MiB, 2MB."""

    name = "size"
    _UNITS: ClassVar[dict[str, int]] = {
        **{"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 10**6, "mb": 10**6, "g": 10**9},
        **{"gb": 10**9, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30},
    }

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(value))
        unit = match.group(2).lower() if match else ""
        if match is None or unit not in self._UNITS or int(match.group(1)) == 0:
            self.fail(f"{value!r} is not a size such as 1048576, 512KiB or 1MiB", param, ctx)
        size = int(match.group(1)) * self._UNITS[unit]
        if not FILE_SIZE_BOUNDS[0] <= size <= FILE_SIZE_BOUNDS[1]:
            self.fail(f"{value!r} is not between 1KiB and 64MiB", param, ctx)
        return size


def policy_file_option(command: F) -> F:
    return click.option(
        "--policy-file",
        envvar="MXGITOPS_POLICY_FILE",
        show_envvar=True,
        type=click.Path(path_type=Path, dir_okay=False, exists=True),
        help="The operator's policy (a YAML file with one policy section); the jobs "
        "repository's .mxgitops.yaml can only make it stricter.  [default: the default policy]",
    )(command)


def max_file_size_option(command: F) -> F:
    return click.option(
        "--max-file-size",
        type=ByteSize(),
        default=MAX_FILE_SIZE,
        show_default="1MiB",
        help="Larger manifest files are reported, not read.",
    )(command)


def env_name(name: str) -> str:
    return "MXGITOPS_" + name.upper().replace("-", "_")


def setting(*decls: str, **kwargs: Any) -> Callable[[F], F]:
    """An option of sync whose default lives in SyncConfig, with its MXGITOPS_* variable."""
    name = decls[0].lstrip("-").split("/")[0]
    kwargs.setdefault("default", None)
    kwargs.setdefault("show_envvar", True)
    return click.option(*decls, envvar=env_name(name), **kwargs)


# Settings of sync that `check` reads too, defined once.
# What a dist job that names no queue runs on; validate, render, status and diff take it
# too, so that a pull request's plan set up like the sync plans like it.
default_runtime_setting = setting(
    "--default-runtime",
    type=click.Choice(registry.NAMES),
    help="What a dist job that names no queue runs on, as the operator's sync setting says: "
    "batch (a batch Job per replica and a scheduler Service) or jobset (one JobSet; a job "
    "that names a queue always runs on JobSet, admitted by Kueue).  [default: batch]",
)
path_setting = setting(
    "--path", metavar="DIR", help="Directory of the manifests in the repository.  [default: .]"
)
namespace_setting = setting(
    "--namespace",
    "-n",
    metavar="NAME",
    help="Namespace of manifests that name none.  [default: the jobs repository's "
    ".mxgitops.yaml, else default]",
)
kubeconfig_setting = setting(
    "--kubeconfig",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Kubeconfig file.  [default: $KUBECONFIG or ~/.kube/config, else the pod's "
    "service account]",
)
context_setting = setting(
    "--context", metavar="NAME", help="Kubeconfig context.  [default: the current context]"
)
notes_setting = setting(
    "--notes/--no-notes", help="Write the status as a git note and push it.  [default: notes]"
)
request_timeout_setting = setting(
    "--request-timeout",
    type=click.FloatRange(0, MAX_REQUEST_TIMEOUT, min_open=True),
    metavar="SECONDS",
    help="Longest one Kubernetes API call may take, retries included; an API server "
    "that does not answer in time is unreachable (exit 4). Also the deadline of each git "
    "command (exit 3) and of each run of a kubeconfig's exec credential plugin (exit 4).  "
    "[default: 30]",
)


def repo_options(command: F) -> F:
    for option in reversed(
        [
            setting(
                "--repo",
                metavar="URL|DIR",
                help="Jobs repository: https://, ssh://, git@host:path, file:// or a local "
                "path; a plain directory is read as it is.  [default: .]",
            ),
            setting(
                "--ref",
                "--branch",
                "ref",
                metavar="REF",
                help="Branch, tag or commit to sync.  [default: the remote's default branch]",
            ),
            setting(
                "--cache-dir",
                type=click.Path(path_type=Path, file_okay=False),
                help="Where clones are kept between runs.  [default: ~/.cache/mxgitops]",
            ),
            setting(
                "--notes-ref",
                metavar="REF",
                help="Notes ref of the status notes.  [default: refs/notes/mxgitops]",
            ),
            setting(
                "--ssh-key",
                type=click.Path(path_type=Path, dir_okay=False),
                help="Private key for ssh remotes.",
            ),
            setting(
                "--known-hosts",
                type=click.Path(path_type=Path, dir_okay=False),
                help="known_hosts file for ssh remotes (unknown hosts are refused).",
            ),
        ]
    ):
        command = option(command)
    return command


def git_token() -> str | None:
    """An HTTPS token comes from the environment only, never from a flag (process lists)."""
    return os.environ.get("MXGITOPS_GIT_TOKEN") or None


def status_token() -> str | None:
    """The forge token of --status-provider: from the environment (or a file), never a flag."""
    return os.environ.get("MXGITOPS_STATUS_TOKEN") or None
