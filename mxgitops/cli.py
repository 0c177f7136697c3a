"""The `mxgitops` command line: click commands only.

A command parses its options, calls one function, renders the result and
returns an `ExitCode`. Errors are `MxGitOpsError`s raised below; `Main.invoke`
is the one place that turns them into `Error: message` on stderr and an exit
code (with the traceback only under `--debug`). Options that several commands
take are defined once, below, as decorators.

To add a command:

    @main.command()
    @output_option
    def sync(output: str) -> ExitCode:
        \"\"\"One line; then examples.\"\"\"
        result = run_sync(...)          # raises MxGitOpsError subclasses
        echo_result(result, output)
        return ExitCode.OK if result.ok else ExitCode.FAILED
"""

from __future__ import annotations

import json
import re
import traceback
from collections.abc import Callable
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import click

from mxgitops import __version__
from mxgitops.errors import (
    ClusterError,
    ConfigError,
    GitError,
    LeaseHeldError,
    ManifestError,
    MxGitOpsError,
)
from mxgitops.manifests import MAX_FILE_SIZE, load
from mxgitops.spec import NAMESPACE


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # a job failed to apply, or a manifest is invalid
    USAGE = 2  # a usage or configuration error
    GIT = 3  # git failed: clone, fetch, checkout, notes
    CLUSTER = 4  # the cluster is unreachable or refused us
    LEASE_HELD = 5  # another sync holds the lease
    INTERNAL = 70  # a bug in mxgitops (sysexits' EX_SOFTWARE); run with --debug


# Most specific first: the first match wins.
ERROR_CODES: tuple[tuple[type[MxGitOpsError], ExitCode], ...] = (
    (ManifestError, ExitCode.FAILED),
    (ConfigError, ExitCode.USAGE),
    (GitError, ExitCode.GIT),
    (ClusterError, ExitCode.CLUSTER),
    (LeaseHeldError, ExitCode.LEASE_HELD),
)


def exit_code_for(error: BaseException) -> ExitCode:
    """The exit code of an error: the one mapping from exceptions to codes."""
    for error_type, code in ERROR_CODES:
        if isinstance(error, error_type):
            return code
    if isinstance(error, click.UsageError):
        return ExitCode.USAGE
    if isinstance(error, click.ClickException):
        return ExitCode.FAILED
    return ExitCode.INTERNAL


class Main(click.Group):
    """The root group: maps errors to exit codes and a command's return to its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            result = super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise  # click prints these and knows their exit code
        except Exception as error:
            code = exit_code_for(error)
            if ctx.params.get("debug"):
                traceback.print_exc()
            message = str(error) or type(error).__name__
            if code is ExitCode.INTERNAL:
                message = f"unexpected {type(error).__name__}: {message} (run with --debug)"
            click.echo(f"Error: {message}", err=True)
            ctx.exit(code)
        if isinstance(result, int) and result:
            ctx.exit(result)
        return result


_HELP = """mxgitops runs MXNet training jobs on Kubernetes from a Git repository of
job manifests.

\b
Examples:
  mxgitops validate                      check the manifests under the current directory
  mxgitops validate jobs/ extra.yaml     check some directories and files
  mxgitops validate -o json jobs/        a machine-readable report
  mxgitops --debug validate jobs/        show a traceback if something unexpected breaks

\b
Exit codes:
  0 OK   1 invalid manifest or failed job   2 usage or configuration error
  3 git error   4 cluster unreachable or forbidden   5 another sync holds the lease
"""


@click.group(cls=Main, help=_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="mxgitops")
@click.option("--debug", is_flag=True, help="Print the traceback of an error.")
def main(debug: bool) -> None:
    del debug  # read by Main.invoke


# -- shared options ---------------------------------------------------------------

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


def namespace_option(command: F) -> F:
    return click.option(
        "--namespace",
        "-n",
        default=NAMESPACE,
        show_default=True,
        metavar="NAME",
        help="Namespace of jobs whose manifest names none.",
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
        return int(match.group(1)) * self._UNITS[unit]


def max_file_size_option(command: F) -> F:
    return click.option(
        "--max-file-size",
        type=ByteSize(),
        default=MAX_FILE_SIZE,
        show_default="1MiB",
        help="Larger manifest files are reported, not read.",
    )(command)


# -- commands -----------------------------------------------------------------------


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@namespace_option
@max_file_size_option
@output_option
def validate(paths: tuple[str, ...], namespace: str, max_file_size: int, output: str) -> ExitCode:
    """Check job manifests without touching a cluster.

    Reads every *.yaml and *.yml file under PATHS (default: the current
    directory; hidden files and directories are skipped), checks each MxJob
    against the schema of its dialect and the rules of mxgitops, and prints
    one line per problem: FILE:LINE: job NAME: field.path: message.
    Documents of other kinds are listed as ignored. Exits 1 if any manifest
    is invalid.

    \b
    Examples:
      mxgitops validate
      mxgitops validate jobs/vision/resnet.yaml
      mxgitops validate --namespace ml-training -o json .
    """
    result = load(paths or ["."], default_namespace=namespace, max_file_size=max_file_size)
    if output == "json":
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        for problem in result.problems:
            click.echo(str(problem))
        for ignored in result.ignored:
            click.echo(str(ignored))
        click.echo(result.summary())
    return ExitCode.OK if result.ok else ExitCode.FAILED


if __name__ == "__main__":  # pragma: no cover
    main(prog_name="mxgitops")
