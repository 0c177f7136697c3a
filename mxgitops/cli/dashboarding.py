"""`mxgitops dashboard`: a read-only web page over the branch's notes.

The dashboard's server, templates and git reading are imported inside the command: no
other command needs them (nor Jinja2).
"""

from __future__ import annotations

import re
from typing import Any

import click

from mxgitops.cli.app import ExitCode, main
from mxgitops.cli.options import git_token, log_format_option, repo_options, request_timeout_setting
from mxgitops.cli.receiving import parse_listen
from mxgitops.errors import ConfigError

_EXAMPLES = """
\b
Examples:
  mxgitops dashboard --repo https://github.com/org/jobs.git
  mxgitops dashboard --listen 127.0.0.1:8080 --repo file:///srv/git/jobs.git \\
      --branch main --base-path /mxgitops --refresh 10 \\
      --commit-url 'https://github.com/org/jobs/commit/{sha}'

\b
Pages: / (the jobs, filtered by ?namespace=, ?state= and ?q=, paged by ?page=),
/jobs/NAMESPACE/NAME (its runs across commits, their training curves, its failure and
log tail) and /commits/SHA (what the sync of that commit did); GET /healthz answers 200
once the branch has been read. docs/guides/dashboard.md puts it behind a sign-in.
"""
_BASE_PATH = re.compile(r"(/(?!\.+(?:/|$))[A-Za-z0-9._~-]+)*")  # no "." or ".." segment


@main.command(epilog=_EXAMPLES)
@click.option(
    "--listen",
    metavar="ADDR:PORT",
    default="0.0.0.0:8080",
    show_default=True,
    envvar="MXGITOPS_LISTEN",
    show_envvar=True,
    help="Address and port to serve on.",
)
@repo_options
@request_timeout_setting
@click.option(
    "--base-path",
    metavar="PATH",
    default="",
    envvar="MXGITOPS_BASE_PATH",
    show_envvar=True,
    help="Path the pages are served under, as a proxy forwards them (/mxgitops).  [default: /]",
)
@click.option(
    "--refresh",
    type=click.FloatRange(1, 3600),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    envvar="MXGITOPS_REFRESH",
    show_envvar=True,
    help="How often the branch and its notes are fetched again.",
)
@click.option(
    "--commit-url",
    metavar="URL",
    default="",
    envvar="MXGITOPS_COMMIT_URL",
    show_envvar=True,
    help="A commit's page on the forge, {sha} standing for its id: each commit links there.",
)
@log_format_option
def dashboard(
    listen: str, base_path: str, refresh: float, commit_url: str, log_format: str, **options: Any
) -> ExitCode:
    """Serve a read-only web page of the jobs, their training and their runs.

    It reads what `mxgitops status` reads, the notes of the tracked branch, fetched
    again every --refresh seconds, and needs no cluster and no Kubernetes rights.
    """
    from mxgitops.cli.console import configure_logging, stopped_cleanly_on_sigterm
    from mxgitops.commands.sync import repository_kind
    from mxgitops.dashboard.loading import Loader
    from mxgitops.dashboard.pages import Site
    from mxgitops.dashboard.server import Refresher, serve
    from mxgitops.settings import reading
    from mxgitops.settings.config import from_options

    address = parse_listen(listen)
    base_path = base_path.rstrip("/")
    if not _BASE_PATH.fullmatch(base_path):
        raise ConfigError(f"--base-path: {base_path[:80]!r} is not a path such as /mxgitops")
    if commit_url and (
        not commit_url.startswith(("https://", "http://")) or "{sha}" not in commit_url
    ):
        raise ConfigError("--commit-url: an http(s) URL with {sha} in it is needed")
    config = from_options({**options, "git_token": git_token()})
    if repository_kind(config.repo) == "directory":
        raise ConfigError(
            f"--repo {config.repo} is a plain directory; notes live in a Git repository"
        )
    configure_logging(log_format, 1)
    loader = Loader(reading.repository_of(config), branch=config.ref, notes_ref=config.notes_ref)
    refresher = Refresher(loader, refresh)
    refresher.start()
    with stopped_cleanly_on_sigterm():
        try:
            serve(address, refresher, Site(base_path=base_path, commit_url=commit_url))
        finally:
            refresher.stop()
    return ExitCode.OK
