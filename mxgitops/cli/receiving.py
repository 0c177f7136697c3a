"""`mxgitops receive`: a push webhook receiver that starts a Job from the sync's CronJob.

The receiver and its link to the cluster are imported inside the command: no other
command needs them.
"""

from __future__ import annotations

from pathlib import Path

import click

from mxgitops.cli.app import ExitCode, main
from mxgitops.cli.options import log_format_option
from mxgitops.errors import ConfigError

_RECEIVE_EXAMPLES = """
\b
Examples:
  mxgitops receive --cronjob mxgitops/mxgitops --secret-file /etc/mxgitops/webhook/secret
  mxgitops receive --listen 127.0.0.1:9000 --cronjob ops/mxgitops-prod --branch main \\
      --secret-file secret.txt --kubeconfig ~/.kube/config

\b
Forges deliver to POST /webhook: GitHub (X-Hub-Signature-256), GitLab (X-Gitlab-Token)
and Gitea (X-Gitea-Signature), with the secret of --secret-file. GET /healthz answers 200
once the CronJob's Jobs are listed; GET /metrics serves the receiver's counters;
GET /webhook answers 405 (forges POST). SIGTERM stops it, logged.
docs/guides/webhooks.md sets up each forge.
"""


@main.command(epilog=_RECEIVE_EXAMPLES)
@click.option(
    "--listen",
    metavar="ADDR:PORT",
    default="0.0.0.0:8080",
    show_default=True,
    envvar="MXGITOPS_LISTEN",
    show_envvar=True,
    help="Address and port to serve on.",
)
@click.option(
    "--cronjob",
    metavar="NAMESPACE/NAME",
    required=True,
    envvar="MXGITOPS_CRONJOB",
    show_envvar=True,
    help="The sync's CronJob, whose jobTemplate each push starts a Job from.",
)
@click.option(
    "--secret-file",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    required=True,
    envvar="MXGITOPS_SECRET_FILE",
    show_envvar=True,
    help="The webhook secret the forges sign with (a trailing newline is not part of it).",
)
@click.option(
    "--branch",
    metavar="BRANCH",
    default="",
    envvar="MXGITOPS_REF",
    show_envvar=True,
    help="The branch whose pushes start a sync (the sync's MXGITOPS_REF): NAME or "
    "refs/heads/NAME.  [default: the repository's default branch, as each push names it]",
)
@click.option(
    "--kubeconfig",
    type=click.Path(path_type=Path, dir_okay=False),
    envvar="MXGITOPS_KUBECONFIG",
    show_envvar=True,
    help="Kubeconfig file.  [default: $KUBECONFIG or ~/.kube/config, else the pod's "
    "service account]",
)
@click.option("--context", metavar="NAME", help="Kubeconfig context.  [default: the current one]")
@click.option(
    "--read-timeout",
    type=click.FloatRange(0.1, 300),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="Time a client has to send its whole request; a slower one is cut off.",
)
@log_format_option
def receive(
    listen: str,
    cronjob: str,
    secret_file: Path,
    branch: str,
    kubeconfig: Path | None,
    context: str | None,
    read_timeout: float,
    log_format: str,
) -> ExitCode:
    """Start a sync at once on a push: a webhook receiver for GitHub, GitLab and Gitea.

    A verified push to the tracked branch starts one Job from the CronJob's
    jobTemplate, as `kubectl create job --from=cronjob/NAME` does; pushes during a
    sync start one more when it ends, however many they are. Every sync still runs
    as the CronJob's, under its Lease.
    """
    from mxgitops.cli.console import configure_logging, stopped_cleanly_on_sigterm
    from mxgitops.kube import cluster
    from mxgitops.outputs.metrics import ReceiverCounters
    from mxgitops.receiver.pushsync import SyncStarter
    from mxgitops.receiver.server import Settings, serve
    from mxgitops.receiver.webhook import tracked_branch

    address = parse_listen(listen)
    namespace, _, name = cronjob.partition("/")
    if not namespace or not name or "/" in name:
        raise ConfigError(f"--cronjob: {cronjob!r} is not NAMESPACE/NAME")
    try:
        branch = tracked_branch(branch)
    except ValueError as exc:
        raise ConfigError(f"--branch: {exc}") from exc
    secret = read_secret(secret_file)
    configure_logging(log_format, 1)
    connection = cluster.connect(kubeconfig=kubeconfig, context=context)
    connection.cronjob(namespace, name)  # there, and readable: else exit 4 now, not per push
    counters = ReceiverCounters()
    starter = SyncStarter(connection, namespace, name, counters)
    starter.start()
    settings = Settings(secret=secret, branch=branch, read_timeout=read_timeout)
    with stopped_cleanly_on_sigterm():
        try:
            serve(address, starter, settings, counters)
        finally:
            starter.stop()
    return ExitCode.OK


def parse_listen(listen: str) -> tuple[str, int]:
    host, colon, port = listen.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--listen: {listen!r} is not ADDR:PORT (such as 0.0.0.0:8080)")
    return host or "0.0.0.0", int(port)


def read_secret(path: Path) -> bytes:
    try:
        secret = path.read_bytes().rstrip(b"\r\n")
    except OSError as exc:
        raise ConfigError(f"--secret-file: cannot read {path}: {exc.strerror}") from exc
    if not secret:
        raise ConfigError(f"--secret-file: {path} is empty; a webhook secret is needed")
    return secret
