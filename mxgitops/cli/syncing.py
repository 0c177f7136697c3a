"""`mxgitops sync`: one reconciliation of the cluster with the jobs repository.

The sync itself, its progress display and the report are imported inside the command:
`validate` needs none of them (tests/cli/test_lazy_imports.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from mxgitops.cli.app import ExitCode, exit_code_for, exit_codes_help, main
from mxgitops.cli.options import (
    ByteSize,
    context_setting,
    default_runtime_setting,
    git_token,
    kubeconfig_setting,
    namespace_setting,
    notes_setting,
    path_setting,
    repo_options,
    request_timeout_setting,
    setting,
    status_token,
)
from mxgitops.kube.calls import DEFAULT_PARALLELISM
from mxgitops.runtimes.shared.reruns import DEFAULT_MAX_DISRUPTION_RUNS, MAX_DISRUPTION_RUNS
from mxgitops.settings.config import (
    DEFAULT_TRAINING_LOG_READS,
    MAX_FAILURE_LOG_LINES,
    MAX_PARALLELISM,
    MAX_STATUS_TIMEOUT,
    MAX_TRAINING_LOG_READS,
    SyncConfig,
    from_options,
)

if TYPE_CHECKING:
    from mxgitops.errors import MxGitOpsError
    from mxgitops.outputs.summary import Summary

_SYNC_EXAMPLES = """
\b
Examples:
  mxgitops sync --dry-run --repo jobs-repo-example
      show the plan for a directory of manifests against the kubeconfig's current
      context (the first line names it), else an empty cluster
  mxgitops sync --offline --repo jobs-repo-example
      the same plan against an empty cluster, whatever the kubeconfig says
  mxgitops sync --repo https://github.com/org/jobs.git --ref main --path jobs \\
      --namespace ml --instance prod --kubeconfig ~/.kube/config --context prod
  MXGITOPS_REPO=git@github.com:org/jobs.git MXGITOPS_SSH_KEY=/keys/id mxgitops sync

\b
Every option can also be set by an MXGITOPS_* environment variable (the option
name in upper case, dashes as underscores: --max-prune-share is
MXGITOPS_MAX_PRUNE_SHARE). The jobs repository's .mxgitops.yaml may set `path`,
`namespace`, `prune` (the options of those names), `policy` (stricter than
--policy-file's) and `cancel` (jobs removed at once, even with on-change: wait);
the others are the operator's, and a repository that sets one gets an error
(docs/reference/settings.md has the table). Flags win over
the environment, the environment over the file. An HTTPS token is read from
MXGITOPS_GIT_TOKEN only, so it never shows in a process list; so is the forge token
for --status-provider, MXGITOPS_STATUS_TOKEN (or --status-token-file).

""" + exit_codes_help()


@main.command(epilog=_SYNC_EXAMPLES)
@repo_options
@path_setting
@namespace_setting
@setting(
    "--state-namespace",
    metavar="NAME",
    help="Namespace of mxgitops' own Lease and ledger.  [default: the namespace the "
    "pod runs in, else --namespace as given by flag or environment, else default]",
)
@setting(
    "--instance",
    metavar="NAME",
    help="Name of this mxgitops instance; it touches only objects labelled with it.  "
    "[default: default]",
)
@kubeconfig_setting
@context_setting
@setting("--prune/--no-prune", help="Delete jobs whose manifest was removed.  [default: prune]")
@setting(
    "--max-prune-share",
    type=click.FloatRange(0, 1),
    metavar="SHARE",
    help="Refuse to prune more than this share of the live jobs.  [default: 0.5]",
)
@setting(
    "--force-prune",
    is_flag=True,
    help="Prune even beyond --max-prune-share, or when no valid manifest is left.",
)
@setting(
    "--dry-run",
    is_flag=True,
    help="Print the plan; change nothing in the cluster or the repository (only the "
    "caches under --cache-dir are written: the clone, the manifests' verdicts).",
)
@setting(
    "--offline",
    is_flag=True,
    help="Plan against an empty cluster on purpose, asking none (whatever the kubeconfig "
    "says); implies --dry-run. Without it a dry run plans against the kubeconfig's "
    "current context (its first line names it), else an empty cluster.",
)
@notes_setting
@setting(
    "--parallelism",
    type=click.IntRange(1, MAX_PARALLELISM),
    metavar="N",
    help=f"Concurrent writes to the API server.  [default: {DEFAULT_PARALLELISM}]",
)
@request_timeout_setting
@setting(
    "--max-disruption-runs",
    type=click.IntRange(0, MAX_DISRUPTION_RUNS),
    metavar="N",
    help="Times in a row one spec of a job runs again for a disruption (an eviction, a "
    "preemption, a node lost: never counted against backoffLimit) before the job is "
    f"Failed, listing them; 0 fails it at the first.  [default: {DEFAULT_MAX_DISRUPTION_RUNS}]",
)
@setting(
    "--failure-log-lines",
    type=click.IntRange(0, MAX_FAILURE_LOG_LINES),
    metavar="N",
    help="Last lines of a failed container's log kept with its job (in the ledger, the "
    "note and status), read once when the job is first seen failed; 0 reads none.  "
    "[default: 20]",
)
@setting(
    "--training-log-reads",
    type=click.IntRange(0, MAX_TRAINING_LOG_READS),
    metavar="N",
    help="Running jobs whose worker 0 log one sync reads for its training record (at most "
    "256 KiB each, from where the last read ended); past N the jobs read longest ago go "
    "first and the others wait for the next sync; a job seen finished is read once more "
    f"whatever N; 0 reads none.  [default: {DEFAULT_TRAINING_LOG_READS}]",
)
@setting(
    "--max-file-size",
    type=ByteSize(),
    help="Larger manifest files are reported, not read.  [default: 1MiB]",
)
@setting(
    "--policy-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The operator's policy (YAML, one policy section); the jobs repository's "
    ".mxgitops.yaml can only make it stricter.  [default: the default policy]",
)
@setting(
    "--accelerators-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Host-path volumes and env vars added to every container that requests a "
    "resource (YAML, one accelerators section: resource name -> volumes, envVars), such "
    "as the node's GPU driver libraries; exempt from the policy, so the jobs repository "
    "cannot set them.  [default: none]",
)
@default_runtime_setting
@setting(
    "--tenant-service-account",
    metavar="NAME",
    help="Make every write into namespace N as the service account NAME of N "
    "(impersonation), so that N's own RBAC and Pod Security admission decide.  [default: off]",
)
@setting(
    "--status-provider",
    type=click.Choice(["github", "gitlab", "gitea"]),
    help="Post a commit status (context mxgitops/INSTANCE) on the synced commit and on "
    "each commit that submitted a live job; the token comes from MXGITOPS_STATUS_TOKEN "
    "or --status-token-file.  [default: none]",
)
@setting(
    "--status-api-url",
    metavar="URL",
    help="The forge's API: GitHub Enterprise's https://HOST/api/v3, a GitLab's "
    "https://HOST/api/v4, a Gitea's https://HOST/api/v1.  [default: api.github.com, "
    "gitlab.com/api/v4; Gitea: the --repo host's /api/v1]",
)
@setting(
    "--status-repository",
    metavar="OWNER/NAME",
    help="The jobs repository on the forge.  [default: from the --repo URL]",
)
@setting(
    "--status-url",
    metavar="TEMPLATE",
    help="The statuses' link, {commit} and {instance} filled in (a dashboard).  [default: none]",
)
@setting(
    "--status-token-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="File holding the forge token (a mounted Secret).  [default: MXGITOPS_STATUS_TOKEN]",
)
@setting(
    "--status-timeout",
    type=click.FloatRange(0, MAX_STATUS_TIMEOUT, min_open=True),
    metavar="SECONDS",
    help="Longest posting the statuses may take, the whole of each call and waits for "
    "the forge's rate limits included; what is left is reported, not posted.  [default: 60]",
)
@setting(
    "--events/--no-events",
    help="Write Kubernetes Events (events.k8s.io) on the jobs a sync acts on.  [default: events]",
)
@setting(
    "--notifications-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Tell chats (Slack, Teams, Discord, Google Chat, Mattermost, a webhook) when a job "
    "fails, succeeds, is disrupted or waits too long (YAML, one notifications list; "
    "docs/reference/settings.md).  [default: none]",
)
@setting(
    "--pushgateway",
    metavar="URL",
    help="Push the sync's metrics to this Prometheus Pushgateway (credentials in the URL "
    "are basic auth, never shown).  [default: none]",
)
@setting(
    "--output", "-o", type=click.Choice(["text", "json"]), help="Report format.  [default: text]"
)
@setting(
    "--log-format",
    type=click.Choice(["text", "json"]),
    help="Log format on stderr; json gives one object per line.  [default: text]",
)
@setting("--verbose/--quiet", "-v/-q", help="More or less logging (and all jobs in the plan).")
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

    from mxgitops.cli.console import (
        Tally,
        configure_logging,
        progress_display,
        stopped_cleanly_on_sigterm,
    )
    from mxgitops.commands.sync import Progress
    from mxgitops.commands.sync import sync as run_sync
    from mxgitops.outputs import report

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
            outcome = run_sync(
                config,
                explicit=explicit,
                progress=progress,
                on_summary=show,
                exit_code=_exit_code,
            )
    except SystemExit:
        # One line, logged (stderr, or the JSON log): the CronJob's logs say why it ended.
        logging.getLogger("mxgitops").error(progress.interrupted())
        raise
    if outcome.note_error:
        click.echo(f"Error: {outcome.note_error}", err=True)
    for undelivered in outcome.undelivered:
        click.echo(f"Error: {undelivered}", err=True)
    return _exit_code(None, outcome.ok, bool(outcome.note_error or outcome.undelivered))


def _exit_code(error: MxGitOpsError | None, ok: bool, undelivered: bool) -> ExitCode:
    """How a sync ends: its error's code; 1 if a job failed or a manifest is invalid;
    3 if all else went well but the note, a status, an Event or the metrics were not
    delivered (what was applied stands)."""
    if error is not None:
        return exit_code_for(error)
    if not ok:
        return ExitCode.FAILED
    return ExitCode.GIT if undelivered else ExitCode.OK


def explicit_settings(ctx: click.Context, options: dict[str, Any]) -> frozenset[str]:
    """The settings given by flag or environment: the jobs repository's .mxgitops.yaml
    does not override them."""
    given = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    return frozenset(name for name in options if ctx.get_parameter_source(name) in given)


def _sync_config(ctx: click.Context, options: dict[str, Any]) -> tuple[SyncConfig, frozenset[str]]:
    explicit = explicit_settings(ctx, options)
    verbose = options.pop("verbose")
    options["verbose"] = None if verbose is None else (1 if verbose else -1)
    options["git_token"] = git_token()
    options["status_token"] = status_token()
    return from_options(options), explicit
