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
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import click
from click.core import ParameterSource

# Only what `validate` needs is imported here: `mxgitops validate FILE` must start in
# well under 0.3 s (issue 14). What only another command needs (the sync and its
# progress display, the report and review renderers, convert's round-trip YAML) is
# imported inside that command; tests/test_lazy_imports.py keeps it so.
from mxgitops.cluster import MAX_REQUEST_TIMEOUT
from mxgitops.config import (
    FILE_SIZE_BOUNDS,
    MAX_FAILURE_LOG_LINES,
    MAX_PARALLELISM,
    SyncConfig,
    effective_policy,
    from_options,
    read_repo_settings,
    with_problems,
)
from mxgitops.errors import (
    CacheBusyError,
    ClusterError,
    ConfigError,
    GitError,
    LeaseHeldError,
    ManifestError,
    MxGitOpsError,
    StateDamagedError,
)
from mxgitops.manifests import MAX_FILE_SIZE, load
from mxgitops.spec import NAMESPACE

if TYPE_CHECKING:
    from mxgitops.report import Summary

# `mxgitops convert --to`: the keys of convert.TARGETS, named here so that the option
# is defined without importing convert (ruamel.yaml); a test checks that they agree.
CONVERT_TARGETS = ("kubeflow", "seed")


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # a job failed to apply, or a manifest is invalid
    USAGE = 2  # a usage or configuration error
    GIT = 3  # git failed: clone, fetch, checkout, notes
    CLUSTER = 4  # the cluster is unreachable or refused us
    LEASE_HELD = 5  # another sync holds the lease (or the Git cache)
    STATE_DAMAGED = 6  # mxgitops' own ledger or Lease cannot be read: repair it
    INTERNAL = 70  # a bug in mxgitops (sysexits' EX_SOFTWARE); run with --debug


# Most specific first: the first match wins.
ERROR_CODES: tuple[tuple[type[MxGitOpsError], ExitCode], ...] = (
    (ManifestError, ExitCode.FAILED),
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
  mxgitops sync --dry-run                what a sync of this checkout would do, writing nothing
  mxgitops sync --repo URL --kubeconfig ~/.kube/config --namespace ml
                                         reconcile the cluster with the repository
  mxgitops status --repo URL             the status note of the branch tip
  mxgitops diff origin/main HEAD         what a pull request does to the jobs
  mxgitops convert -w jobs/old.yaml      rewrite an older manifest as kubeflow.org/v1
  mxgitops --debug sync ...              show a traceback if something unexpected breaks

Each command has its own --help, with more examples.

\b
Exit codes:
  0 OK   1 invalid manifest or failed job   2 usage or configuration error
  3 git error (a sync that applied but could not push its note too)
  4 cluster unreachable or forbidden   5 another sync holds the lease or the Git cache
  6 mxgitops' ledger or Lease is damaged (the message says how to repair it)
  70 a bug in mxgitops (run with --debug for the traceback)   143 stopped by SIGTERM
"""


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """--version: the installed version, read only when asked for (importlib.metadata
    and the email package it loads cost every other command ~40 ms)."""
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


# -- commands -----------------------------------------------------------------------


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@namespace_option
@max_file_size_option
@policy_file_option
@output_option
@click.option("--strict", is_flag=True, help="Fail on warnings too.")
def validate(
    paths: tuple[str, ...],
    namespace: str | None,
    max_file_size: int,
    policy_file: Path | None,
    output: str,
    strict: bool,
) -> ExitCode:
    """Check job manifests without touching a cluster.

    Reads every *.yaml and *.yml file under PATHS (default: the current
    directory; hidden files and directories are skipped), checks each MxJob
    against the schema of its dialect and the rules of mxgitops, and prints
    one line per problem: FILE:LINE: job NAME: field.path: message.
    Warnings (an older API version, a field mxgitops cannot honour) read
    FILE:LINE: job NAME: field.path: warning: message. Documents of other
    kinds are listed as ignored. Every job is checked against the policy
    (the defaults, --policy-file, and .mxgitops.yaml's stricter policy): a
    violation reads FILE:LINE: job NAME: field.path: policy: message.
    Exits 1 if any manifest is invalid or violates the policy, or with
    --strict if there is any warning.

    \b
    Examples:
      mxgitops validate
      mxgitops validate jobs/vision/resnet.yaml
      mxgitops validate --namespace ml-training -o json .
    """
    # Like a sync of this repository: its .mxgitops.yaml names the default namespace,
    # and what it may not set is reported with the manifests' problems.
    repo_file = read_repo_settings(Path("."))
    namespace = namespace or repo_file.values.get("namespace", NAMESPACE)
    policy = effective_policy(
        SyncConfig(policy_file=policy_file, repo_policy=repo_file.values.get("repo_policy", {}))
    )
    loaded = load(
        paths or ["."], default_namespace=namespace, max_file_size=max_file_size, policy=policy
    )
    result = with_problems(loaded, repo_file.refused)
    if output == "json":
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        for finding in sorted([*result.problems, *result.warnings], key=lambda p: (p.file, p.line)):
            click.echo(str(finding))
        for ignored in result.ignored:
            click.echo(str(ignored))
        click.echo(result.summary())
    return ExitCode.OK if result.passes(strict=strict) else ExitCode.FAILED


_SYNC_EXAMPLES = """
\b
Examples:
  mxgitops sync --dry-run --repo jobs-repo-example
      show the plan for a directory of manifests; no cluster needed
  mxgitops sync --repo https://github.com/org/jobs.git --ref main --path jobs \\
      --namespace ml --instance prod --kubeconfig ~/.kube/config --context prod
  MXGITOPS_REPO=git@github.com:org/jobs.git MXGITOPS_SSH_KEY=/keys/id mxgitops sync

\b
Every option can also be set by an MXGITOPS_* environment variable (the option
name in upper case, dashes as underscores: --max-prune-share is
MXGITOPS_MAX_PRUNE_SHARE). The jobs repository's .mxgitops.yaml may set --path,
--namespace and --prune (and a policy stricter than the one of --policy-file);
the others are the operator's, and a
repository that sets one gets an error (the README has the table). Flags win over
the environment, the environment over the file. An HTTPS token is read from
MXGITOPS_GIT_TOKEN only, so it never shows in a process list.

\b
Exit codes:
  0 in sync   1 a job failed to apply or a manifest is invalid
  2 usage or configuration error   3 git error
  4 cluster unreachable or forbidden   5 another sync holds the lease or the cache
  6 the ledger or Lease is damaged (the message says how to repair it)
  70 a bug in mxgitops (run with --debug)   143 stopped by SIGTERM
A note that cannot be pushed is reported on its own line after the summary (exit 3
when everything else went well).
"""


def _env(name: str) -> str:
    return "MXGITOPS_" + name.upper().replace("-", "_")


def _opt(*decls: str, **kwargs: Any) -> Callable[[F], F]:
    """An option of sync whose default lives in SyncConfig, with its MXGITOPS_* variable."""
    name = decls[0].lstrip("-").split("/")[0]
    kwargs.setdefault("default", None)
    kwargs.setdefault("show_envvar", True)
    return click.option(*decls, envvar=_env(name), **kwargs)


def repo_options(command: F) -> F:
    for option in reversed(
        [
            _opt(
                "--repo",
                metavar="URL|DIR",
                help="Jobs repository: https://, ssh://, git@host:path, file:// or a local "
                "path; a plain directory is read as it is.  [default: .]",
            ),
            _opt(
                "--ref",
                "--branch",
                "ref",
                metavar="REF",
                help="Branch, tag or commit to sync.  [default: the remote's default branch]",
            ),
            _opt(
                "--cache-dir",
                type=click.Path(path_type=Path, file_okay=False),
                help="Where clones are kept between runs.  [default: ~/.cache/mxgitops]",
            ),
            _opt(
                "--notes-ref",
                metavar="REF",
                help="Notes ref of the status notes.  [default: refs/notes/mxgitops]",
            ),
            _opt(
                "--ssh-key",
                type=click.Path(path_type=Path, dir_okay=False),
                help="Private key for ssh remotes.",
            ),
            _opt(
                "--known-hosts",
                type=click.Path(path_type=Path, dir_okay=False),
                help="known_hosts file for ssh remotes (unknown hosts are refused).",
            ),
        ]
    ):
        command = option(command)
    return command


@main.command(epilog=_SYNC_EXAMPLES)
@repo_options
@_opt("--path", metavar="DIR", help="Directory of the manifests in the repository.  [default: .]")
@_opt(
    "--namespace",
    "-n",
    metavar="NAME",
    help="Namespace of manifests that name none.  [default: the jobs repository's "
    ".mxgitops.yaml, else default]",
)
@_opt(
    "--state-namespace",
    metavar="NAME",
    help="Namespace of mxgitops' own Lease and ledger.  [default: the namespace the "
    "pod runs in, else --namespace as given by flag or environment, else default]",
)
@_opt(
    "--instance",
    metavar="NAME",
    help="Name of this mxgitops instance; it touches only objects labelled with it.  "
    "[default: default]",
)
@_opt(
    "--kubeconfig",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Kubeconfig file.  [default: $KUBECONFIG or ~/.kube/config, else the pod's "
    "service account]",
)
@_opt("--context", metavar="NAME", help="Kubeconfig context.  [default: the current context]")
@_opt("--prune/--no-prune", help="Delete jobs whose manifest was removed.  [default: prune]")
@_opt(
    "--max-prune-share",
    type=click.FloatRange(0, 1),
    metavar="SHARE",
    help="Refuse to prune more than this share of the live jobs.  [default: 0.5]",
)
@_opt(
    "--force-prune",
    is_flag=True,
    help="Prune even beyond --max-prune-share, or when no valid manifest is left.",
)
@_opt("--dry-run", is_flag=True, help="Print the plan; write nothing anywhere.")
@_opt("--notes/--no-notes", help="Write the status as a git note and push it.  [default: notes]")
@_opt(
    "--parallelism",
    type=click.IntRange(1, MAX_PARALLELISM),
    metavar="N",
    help="Concurrent writes to the API server.  [default: 8]",
)
@_opt(
    "--request-timeout",
    type=click.FloatRange(0, MAX_REQUEST_TIMEOUT, min_open=True),
    metavar="SECONDS",
    help="Longest one Kubernetes API call may take, retries included; an API server "
    "that does not answer in time is unreachable (exit 4).  [default: 30]",
)
@_opt(
    "--failure-log-lines",
    type=click.IntRange(0, MAX_FAILURE_LOG_LINES),
    metavar="N",
    help="Last lines of a failed container's log kept with its job (in the ledger, the "
    "note and status), read once when the job is first seen failed; 0 reads none.  "
    "[default: 20]",
)
@_opt(
    "--max-file-size",
    type=ByteSize(),
    help="Larger manifest files are reported, not read.  [default: 1MiB]",
)
@_opt(
    "--policy-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The operator's policy (YAML, one policy section); the jobs repository's "
    ".mxgitops.yaml can only make it stricter.  [default: the default policy]",
)
@_opt(
    "--accelerators-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Host-path volumes and env vars added to every container that requests a "
    "resource (YAML, one accelerators section: resource name -> volumes, envVars), such "
    "as the node's GPU driver libraries; exempt from the policy, so the jobs repository "
    "cannot set them.  [default: none]",
)
@_opt(
    "--tenant-service-account",
    metavar="NAME",
    help="Make every write into namespace N as the service account NAME of N "
    "(impersonation), so that N's own RBAC and Pod Security admission decide.  [default: off]",
)
@_opt("--output", "-o", type=click.Choice(["text", "json"]), help="Report format.  [default: text]")
@_opt(
    "--log-format",
    type=click.Choice(["text", "json"]),
    help="Log format on stderr; json gives one object per line.  [default: text]",
)
@_opt("--verbose/--quiet", "-v/-q", help="More or less logging (and all jobs in the plan).")
@click.pass_context
def sync(ctx: click.Context, /, **options: Any) -> ExitCode:
    """Reconcile the cluster with the job manifests of a Git repository.

    Fetches the repository, validates every manifest, compares the jobs it
    wants with the jobs this instance runs, creates, replaces, repairs or
    deletes their Kubernetes objects, and writes a status note on the
    synced commit. With --dry-run it prints what it would do, the way
    `kubectl diff` or a terraform plan does, and changes nothing.
    """
    # Imported here, not above: validate needs none of them (see the imports).
    import logging

    from mxgitops import report
    from mxgitops.console import (
        Tally,
        configure_logging,
        progress_display,
        stopped_cleanly_on_sigterm,
    )
    from mxgitops.sync import Progress
    from mxgitops.sync import sync as run_sync

    config, explicit = _sync_config(ctx, options)
    configure_logging(config.log_format, config.verbose)

    def show(summary: Summary, notices: tuple[str, ...]) -> None:
        """Printed and logged before the note is written: a failed push never hides it."""
        if config.output == "json":
            shown = {"notices": list(notices), **summary.to_dict()}
            click.echo(json.dumps(shown, indent=2, sort_keys=True))
        else:
            for notice in notices:
                click.echo(f"Note: {notice}")
            click.echo(report.render_plan(summary, verbose=config.verbose > 0))
        logging.getLogger("mxgitops").info(
            "sync finished",
            extra={"commit": summary.commit, "ok": summary.ok, "actions": summary.counts()},
        )

    progress = Tally(Progress())
    try:
        with (
            stopped_cleanly_on_sigterm(),
            progress_display(config.output == "text" and config.verbose >= 0) as display,
        ):
            progress.display = display
            outcome = run_sync(config, explicit=explicit, progress=progress, on_summary=show)
    except SystemExit:
        # One line, logged (stderr, or the JSON log): the CronJob's logs say why it ended.
        logging.getLogger("mxgitops").error(progress.interrupted())
        raise
    if outcome.note_error:
        click.echo(f"Error: {outcome.note_error}", err=True)
    if not outcome.ok:
        return ExitCode.FAILED
    return ExitCode.GIT if outcome.note_error else ExitCode.OK


def _sync_config(ctx: click.Context, options: dict[str, Any]) -> tuple[SyncConfig, frozenset[str]]:
    given = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    explicit = frozenset(name for name in options if ctx.get_parameter_source(name) in given)
    verbose = options.pop("verbose")
    options["verbose"] = None if verbose is None else (1 if verbose else -1)
    options["git_token"] = _git_token()
    return from_options(options), explicit


def _git_token() -> str | None:
    """An HTTPS token comes from the environment only, never from a flag (process lists)."""
    return os.environ.get("MXGITOPS_GIT_TOKEN") or None


@main.command()
@repo_options
@click.argument("commit", required=False)
@click.option(
    "--output",
    "-o",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
    help="Report format; markdown suits a pull-request comment.",
)
@_opt("--instance", metavar="NAME", help="The instance whose note it should be.")
def status(commit: str | None, output: str, **options: Any) -> ExitCode:
    """Show the status note mxgitops wrote on a commit (default: the branch tip).

    \b
    Examples:
      mxgitops status --repo https://github.com/org/jobs.git
      mxgitops status --repo file:///srv/git/jobs.git 1a2b3c4 -o json
    """
    # Imported here, not above: validate needs none of them (see the imports).
    from mxgitops import report, vouching
    from mxgitops.commands import missing_note_hint, read_status

    config = from_options({**options, "git_token": _git_token()})
    summary, sha, unreadable = read_status(config, commit)
    where = f"the note on {sha[:12]} ({config.notes_ref})"
    if unreadable:
        click.echo(f"warning: {where} is {unreadable}; read as absent", err=True)
    if summary is not None and (doubts := vouching.doubts(summary, options.get("instance"))):
        click.echo(
            f"warning: mxgitops cannot vouch for {where}, which anyone who can push "
            f"there can write: {'; '.join(doubts)}",
            err=True,
        )
    if summary is None:
        click.echo(
            f"No mxgitops status note on {sha[:12]} ({config.notes_ref}): that commit "
            f"has not been synced (or its note was not pushed){missing_note_hint(config)}.",
            err=True,
        )
        return ExitCode.FAILED
    renderers = {
        "text": report.render_table,
        "markdown": report.render_markdown,
        "json": report.render_json,
    }
    click.echo(renderers[output](summary))
    if output == "text":
        click.echo(f"\nnote written {report.age(summary, datetime.now(UTC))}")
    return ExitCode.OK


@main.command()
@click.argument("base")
@click.argument("head", default="HEAD")
@click.option(
    "--repo",
    "repo",
    default=".",
    show_default=True,
    metavar="DIR",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A checkout of the jobs repository.",
)
@click.option(
    "--path",
    metavar="DIR",
    help="Directory of the manifests.  [default: .mxgitops.yaml's path, else .]",
)
@namespace_option
@policy_file_option
@click.option(
    "--output",
    "-o",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
    help="Report format; markdown suits a pull-request comment.",
)
def diff(
    base: str,
    head: str,
    repo: Path,
    path: str | None,
    namespace: str | None,
    policy_file: Path | None,
    output: str,
) -> ExitCode:
    """Show which jobs a change adds, changes and removes, and what it breaks.

    Compares the manifests of two commits of a checkout; needs no cluster.
    Exits 1 when HEAD has invalid manifests.

    \b
    Examples:
      mxgitops diff origin/main HEAD
      mxgitops diff origin/main HEAD -o markdown > comment.md
    """
    # Imported here, not above: validate needs none of them (see the imports).
    from mxgitops import review
    from mxgitops.commands import diff_commits

    result = diff_commits(repo, base, head, path=path, namespace=namespace, policy_file=policy_file)
    renderers = {
        "text": review.render_text,
        "markdown": review.render_markdown,
        "json": review.render_json,
    }
    click.echo(renderers[output](result))
    return ExitCode.OK if result.ok else ExitCode.FAILED


@main.command(name="convert")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--to",
    "target",
    type=click.Choice(CONVERT_TARGETS),
    default="kubeflow",
    show_default=True,
    help="kubeflow: kubeflow.org/v1 MXJob; seed: mxnet.mlkube.io/v1beta1 MxJob.",
)
@click.option("--write", "-w", is_flag=True, help="Rewrite the files instead of printing them.")
def convert_command(files: tuple[Path, ...], target: str, write: bool) -> ExitCode:
    """Rewrite manifests of any MXJob API version in kubeflow.org/v1 (or the seed dialect).

    Comments, key order and quoting are kept wherever the YAML library allows;
    `kubectl get` output is cleaned. Each job is listed on stderr, with a note
    when its spec changes (a sync then replaces it once). Documents of other
    kinds are left as they are. Exits 1, writing nothing, if a manifest is
    invalid or cannot be expressed in the target.

    \b
    Examples:
      mxgitops convert jobs/old-mxjob.yaml            print it as kubeflow.org/v1
      mxgitops convert -w jobs/*.yaml                 rewrite the files in place
      mxgitops convert --to seed jobs/local.yaml
    """
    from mxgitops import convert  # ruamel.yaml: imported by this command only

    dialect = convert.TARGETS[target]
    results = convert.convert_files(files, dialect)
    if write:
        convert.write(results)
    else:
        click.echo(convert.render(results), nl=False)
    for result in results:
        for line in result.describe(dialect):
            click.echo(line, err=True)
    return ExitCode.OK


if __name__ == "__main__":  # pragma: no cover
    main(prog_name="mxgitops")
