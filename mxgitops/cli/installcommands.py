"""`mxgitops install` and `mxgitops uninstall`: the flags turned into one call of
mxgitops/install/run.py (or, with --export, of its rendering). Imported inside each
command: validate needs none of it (tests/test_lazy_imports.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from mxgitops.cli.app import ExitCode, exit_code_for, main
from mxgitops.cli.options import context_setting, kubeconfig_setting, request_timeout_setting

F = TypeVar("F", bound=Callable[..., Any])
_FILE = click.Path(path_type=Path, dir_okay=False, exists=True)
DEFAULT_WAIT = 600.0  # seconds the first sync is waited for: a clone of a large repository

_INSTALL_EXAMPLES = """
\b
Examples:
  mxgitops install --repo https://github.com/org/jobs.git --token-file token.txt
  mxgitops install --repo https://github.com/org/jobs.git --token-file token.txt \\
      --receiver --webhook-secret-file webhook.txt --queues --dashboard
  mxgitops install --repo https://github.com/org/jobs.git --export > mxgitops.yaml

\b
Exit codes: those of `mxgitops sync`, the first sync's own; a problem found before
anything is applied exits with the code a sync would meet (3 the repository, 4 the
cluster, 1 a prerequisite or a right missing); 1 if the first sync did not end in time.
"""


def _namespace() -> Callable[[F], F]:
    return click.option(
        "--namespace",
        "-n",
        default="mxgitops",
        show_default=True,
        metavar="NAME",
        help="Where mxgitops itself is installed (its CronJob, Lease and ledger).",
    )


@main.command(epilog=_INSTALL_EXAMPLES)
@click.option("--repo", required=True, metavar="URL", help="The jobs repository's URL.")
@click.option(
    "--branch", default="main", show_default=True, metavar="BRANCH", help="Branch to sync."
)
@click.option("--path", metavar="DIR", help="Directory of the manifests in the repository.")
@click.option(
    "--token-file", type=_FILE, help="The git token (fetch, push notes): Secret mxgitops-git."
)
@click.option("--ssh-key", type=_FILE, help="An SSH deploy key instead: Secret mxgitops-git.")
@click.option("--known-hosts", type=_FILE, help="known_hosts for --ssh-key's host.")
@click.option("--status-token-file", type=_FILE, help="The forge token for commit statuses.")
@_namespace()
@click.option("--jobs-namespace", metavar="NAME", help="Namespace of manifests that name none.")
@click.option("--schedule", metavar="CRON", help="The CronJob's schedule.  [default: */5 * * * *]")
@click.option(
    "--image", metavar="REF", help="The image to run.  [default: this version's published image]"
)
@click.option("--receiver", is_flag=True, help="The push webhook receiver too.")
@click.option("--webhook-secret-file", type=_FILE, help="The receiver's webhook secret.")
@click.option("--queues", is_flag=True, help="The JobSet runtime's and Kueue's rights.")
@click.option(
    "--status-provider",
    type=click.Choice(["github", "gitlab", "gitea"]),
    help="Post commit statuses there (with --status-token-file).",
)
@click.option("--pushgateway", metavar="URL", help="Push each sync's metrics there.")
@click.option("--dashboard", is_flag=True, help="The read-only dashboard too (its Deployment).")
@click.option("--export", is_flag=True, help="Print the manifests (no Secrets); touch nothing.")
@click.option("--dry-run", is_flag=True, help="Show the server-side diff; write nothing.")
@click.option(
    "--wait-timeout",
    type=click.FloatRange(0),
    default=DEFAULT_WAIT,
    show_default=True,
    metavar="SECONDS",
    help="How long the first sync is waited for.",
)
@kubeconfig_setting
@context_setting
@request_timeout_setting
def install(**options: Any) -> ExitCode:
    """Install mxgitops in the current cluster and run its first sync.

    Renders the manifests of the kustomize base the manual documents (shipped
    in the package), checks first what check checks and the installing user's
    rights (a problem stops it before any write, one line each), applies them
    server-side under the field manager mxgitops-install, creates the Secrets
    from the files named (never printed), starts the first sync at once and
    prints its outcome and the note it wrote. Run again, it changes only what
    the flags changed, and nothing (no write) when they changed nothing.
    """
    from mxgitops import __version__
    from mxgitops.install import published_image
    from mxgitops.install.overlay import Installation

    if options["webhook_secret_file"] is not None and not options["receiver"]:
        raise click.UsageError("--webhook-secret-file is the receiver's: add --receiver")
    installation = Installation(
        repo=options["repo"],
        image=options["image"] or published_image(__version__),
        namespace=options["namespace"],
        branch=options["branch"],
        path=options["path"],
        jobs_namespace=options["jobs_namespace"],
        schedule=options["schedule"],
        receiver=options["receiver"],
        queues=options["queues"],
        dashboard=options["dashboard"],
        status_provider=options["status_provider"],
        pushgateway=options["pushgateway"],
        token_file=options["token_file"],
        ssh_key=options["ssh_key"],
        known_hosts=options["known_hosts"],
        status_token_file=options["status_token_file"],
        webhook_secret_file=options["webhook_secret_file"],
    )
    if options["export"]:
        from mxgitops.install.export import export

        click.echo(export(installation), nl=False)
        return ExitCode.OK
    return _install(installation, options)


def _install(installation: Any, options: dict[str, Any]) -> ExitCode:
    from mxgitops.install import run
    from mxgitops.install.note import first_note
    from mxgitops.kube.cluster import connect
    from mxgitops.settings.config import from_options, read_token

    token = read_token(installation.token_file, "--token-file") if installation.token_file else None
    connection = {k: options[k] for k in ("kubeconfig", "context", "request_timeout")}
    config = run.sync_config(installation, from_options({**connection, "git_token": token}))
    cluster = connect(
        kubeconfig=config.kubeconfig, context=config.context, request_timeout=config.request_timeout
    )
    outcome = run.install(
        cluster,
        installation,
        config,
        dry_run=options["dry_run"],
        wait_timeout=options["wait_timeout"],
        echo=click.echo,
    )
    if outcome.error is not None:
        return exit_code_for(outcome.error)
    done = outcome.first_sync
    if done is None:
        return ExitCode.OK
    click.echo(first_note(config))
    if done.exit_code is None:
        return ExitCode.FAILED
    codes = {code.value: code for code in ExitCode}
    return codes.get(done.exit_code, ExitCode.FAILED)


@main.command()
@_namespace()
@click.option(
    "--jobs",
    is_flag=True,
    help="Delete the instance's training jobs too: Jobs, Services, JobSets (asks first).",
)
@click.option("--yes", is_flag=True, help="Do not ask before deleting the training jobs.")
@kubeconfig_setting
@context_setting
@request_timeout_setting
def uninstall(namespace: str, jobs: bool, yes: bool, **options: Any) -> ExitCode:
    """Remove what `mxgitops install` made in NAMESPACE: its namespace, Secrets,
    RBAC, CronJob (and its Jobs), the receiver, the dashboard. Training jobs stay,
    unless --jobs is given and confirmed.

    \b
    Examples:
      mxgitops uninstall
      mxgitops uninstall --namespace ml-gitops --jobs
    """
    from mxgitops.install import run
    from mxgitops.kube.cluster import connect
    from mxgitops.settings.config import from_options

    if jobs and not yes:
        click.confirm(
            "Delete every training job this instance runs, in every namespace?", abort=True
        )
    config = from_options(options)  # the connection's settings, their defaults filled in
    cluster = connect(
        kubeconfig=config.kubeconfig, context=config.context, request_timeout=config.request_timeout
    )
    run.uninstall(cluster, namespace, jobs=jobs, echo=click.echo)
    return ExitCode.OK
