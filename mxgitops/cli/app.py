"""The root of the `mxgitops` command line: the group, exit codes and the one mapping
from errors to them.

A command parses its options, calls one function, renders the result and returns an
`ExitCode`. Errors are `MxGitOpsError`s raised below the CLI; `Main.invoke` is the one
place that turns them into `Error: message` on stderr and an exit code (with the
traceback only under `--debug`).
"""

from __future__ import annotations

import textwrap
from enum import IntEnum
from typing import Any

import click

from mxgitops.errors import (
    CacheBusyError,
    ClusterError,
    ConfigError,
    GitError,
    LeaseHeldError,
    ManifestError,
    MxGitOpsError,
    PrerequisiteMissing,
    StateDamagedError,
)


class ExitCode(IntEnum):
    """What a command ends with; each code's meaning is in EXIT_CODE_MEANINGS."""

    OK = 0
    FAILED = 1
    USAGE = 2
    GIT = 3
    CLUSTER = 4
    LEASE_HELD = 5
    STATE_DAMAGED = 6
    INTERNAL = 70  # sysexits' EX_SOFTWARE


STOPPED_BY_SIGTERM = 143  # 128 + SIGTERM's number (`console.stopped_cleanly_on_sigterm`)

# What each exit code tells the person or the CronJob that ran a command: the one
# explanation, from which the group's and sync's --help (`exit_codes_help`) and the
# manual's table (scripts/generate_reference.py) are made.
EXIT_CODE_MEANINGS: dict[int, str] = {
    ExitCode.OK: "in sync / everything valid",
    ExitCode.FAILED: "a job failed to apply, a manifest is invalid, or (check) a "
    "prerequisite is missing",
    ExitCode.USAGE: "usage or configuration error",
    ExitCode.GIT: "git error (a sync that applied its plan but could not write or push its "
    "note, post a commit status, write its Events or push its metrics too: the summary is "
    "printed first)",
    ExitCode.CLUSTER: "cluster unreachable or forbidden",
    ExitCode.LEASE_HELD: "another sync holds the lease, or kept the Git cache longer than 300 s",
    ExitCode.STATE_DAMAGED: "mxgitops' ledger or Lease is damaged: the message names it and "
    "how to repair it",
    ExitCode.INTERNAL: "a bug in mxgitops (run with `--debug` for the traceback)",
    STOPPED_BY_SIGTERM: "stopped by SIGTERM (one log line says how far it got)",
}


def exit_codes_help() -> str:
    """The `Exit codes:` paragraph of --help, one code a line, from EXIT_CODE_MEANINGS."""
    lines = ["\b", "Exit codes:"]
    for code, meaning in EXIT_CODE_MEANINGS.items():
        lines += textwrap.wrap(
            meaning.replace("`", ""),
            width=88,
            initial_indent=f"  {code} ",
            subsequent_indent=" " * 6,
        )
    return "\n".join(lines) + "\n"


# Most specific first: the first match wins.
ERROR_CODES: tuple[tuple[type[MxGitOpsError], ExitCode], ...] = (
    (ManifestError, ExitCode.FAILED),
    (PrerequisiteMissing, ExitCode.FAILED),  # mxgitops check
    (ConfigError, ExitCode.USAGE),
    (GitError, ExitCode.GIT),
    (ClusterError, ExitCode.CLUSTER),
    (LeaseHeldError, ExitCode.LEASE_HELD),
    (CacheBusyError, ExitCode.LEASE_HELD),
    (StateDamagedError, ExitCode.STATE_DAMAGED),
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


# The manual's page for the command line, in the repository, and where the published
# manual shows it (mkdocs.yml's site_url; pyproject.toml's Documentation URL): every
# command's --help ends with the URL of its section there.
MANUAL = "docs/reference/cli.md"
MANUAL_URL = "https://mxgitops.github.io/mxgitops/reference/cli/"


def manual_anchor(command_path: str) -> str:
    """The section of a command in MANUAL: its heading's slug (`mxgitops sync` ->
    `mxgitops-sync`), as both MkDocs and GitHub make it."""
    return command_path.replace(" ", "-")


def _write_manual_path(ctx: click.Context, formatter: click.HelpFormatter) -> None:
    formatter.write_paragraph()
    formatter.write_text(f"Manual: {MANUAL_URL}#{manual_anchor(ctx.command_path)}")


class ManualCommand(click.Command):
    """A command whose --help ends with the URL of its section in the manual."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)
        _write_manual_path(ctx, formatter)


class Main(click.Group):
    """The root group: maps errors to exit codes and a command's return to its exit code.

    Its commands are ManualCommands, and its own --help ends with the manual's URL too."""

    command_class = ManualCommand

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)
        _write_manual_path(ctx, formatter)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            result = super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise  # click prints these and knows their exit code
        except Exception as error:
            code = exit_code_for(error)
            if ctx.params.get("debug"):
                import traceback  # only under --debug: no command pays for it otherwise

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
  mxgitops sync --dry-run                what a sync of this checkout would do, changing nothing
  mxgitops sync --repo URL --kubeconfig ~/.kube/config --namespace ml
                                         reconcile the cluster with the repository
  mxgitops status --repo URL             the status note of the branch tip
  mxgitops diff origin/main HEAD         what a pull request does to the jobs
  mxgitops convert -w jobs/old.yaml      rewrite an older manifest as kubeflow.org/v1
  mxgitops check --repo URL              what a cluster and a repository lack for a first sync
  mxgitops install --repo URL --token-file F
                                         install in the current cluster, run a first sync
  mxgitops --debug sync ...              show a traceback if something unexpected breaks

Each command has its own --help, with more examples.

""" + exit_codes_help()


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """--version: the installed version, read only when asked for (importlib.metadata
    and the email package it loads would cost every other command at startup)."""
    if not value or ctx.resilient_parsing:
        return
    from mxgitops import __version__

    click.echo(f"mxgitops, version {__version__}")
    ctx.exit()


@click.group(cls=Main, help=_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
@click.option("--debug", is_flag=True, help="Print the traceback of an error.")
def main(debug: bool) -> None:
    del debug  # read by Main.invoke
    # The runtimes' part of every spec hash, before a command makes or hashes a job
    from mxgitops.runtimes.registry import install_hash_shapes

    install_hash_shapes()
