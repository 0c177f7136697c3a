"""`mxgitops status` and `mxgitops diff`: what a sync wrote, and what a change would do.

Their renderers and the git-reading commands are imported inside each command:
`validate` needs none of them (tests/test_lazy_imports.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from mxgitops.cli.app import ExitCode, main
from mxgitops.cli.options import (
    default_runtime_setting,
    git_token,
    namespace_option,
    policy_file_option,
    repo_options,
    setting,
)
from mxgitops.settings.config import SyncConfig, from_options


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
@setting("--instance", metavar="NAME", help="The instance whose note it should be.")
def status(commit: str | None, output: str, **options: Any) -> ExitCode:
    """Show the status note mxgitops wrote on a commit (default: the branch tip).

    \b
    Examples:
      mxgitops status --repo https://github.com/org/jobs.git
      mxgitops status --repo file:///srv/git/jobs.git 1a2b3c4 -o json
    """
    # Imported here, not above: validate needs none of them (see the imports).
    from mxgitops.commands.status import in_checkout, missing_note_hint, read_status
    from mxgitops.outputs import report, vouching

    config = in_checkout(from_options({**options, "git_token": git_token()}))
    summary, sha, unreadable = read_status(config, commit)
    where = f"the note on {sha[:12]} ({config.notes_ref})"
    if unreadable:
        click.echo(f"warning: {where} is {unreadable}; read as absent", err=True)
    asked = options.get("instance")
    if summary is not None and (other := vouching.another_instance(summary, asked)):
        click.echo(
            f"Note: {where} was written by instance {other}, not {asked}: it is {other}'s status",
            err=True,
        )
    if summary is not None and (doubts := vouching.doubts(summary)):
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
@default_runtime_setting
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
    default_runtime: str | None,
    output: str,
) -> ExitCode:
    """Show which jobs a change adds, changes and removes, and what it breaks.

    Compares the manifests of two commits of a checkout; needs no cluster.
    What a change replaces and what it patches in place depends on the runtime
    a job runs on: give --default-runtime as the operator's sync has it.
    Exits 1 when HEAD has invalid manifests.

    \b
    Examples:
      mxgitops diff origin/main HEAD
      mxgitops diff origin/main HEAD -o markdown > comment.md
    """
    # Imported here, not above: validate needs none of them (see the imports).
    from mxgitops.commands import review
    from mxgitops.commands.status import diff_commits

    result = diff_commits(
        repo,
        base,
        head,
        path=path,
        namespace=namespace,
        policy_file=policy_file,
        default_runtime=default_runtime or SyncConfig.default_runtime,
    )
    renderers = {
        "text": review.render_text,
        "markdown": review.render_markdown,
        "json": review.render_json,
    }
    click.echo(renderers[output](result))
    return ExitCode.OK if result.ok else ExitCode.FAILED
