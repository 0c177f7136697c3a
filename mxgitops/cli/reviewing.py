"""`mxgitops status`, `history` and `diff`: what a sync wrote, every run of a job, and
what a change would do.

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
    namespace_setting,
    path_setting,
    policy_file_option,
    repo_options,
    request_timeout_setting,
    setting,
)
from mxgitops.settings.config import DEFAULT_NOTES_REF, SyncConfig, from_options


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
    from mxgitops.commands.status import missing_note_hint, read_status
    from mxgitops.outputs import report, vouching

    config = from_options({**options, "git_token": git_token()})
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
@repo_options
@path_setting
@namespace_setting
@request_timeout_setting
@click.argument("job", metavar="NAMESPACE/JOB")
@click.option(
    "--output",
    "-o",
    type=click.Choice(["table", "json", "markdown"]),
    default="table",
    show_default=True,
    help="Report format; markdown suits a pull-request comment.",
)
@click.option(
    "--metric",
    metavar="NAME",
    help="Sort the runs by their best value of this metric, best first (lower first for "
    "a loss or an error), and show it in the FINAL and BEST columns; `accuracy` finds "
    "validation-accuracy.  [default: newest first, by the first validation metric]",
)
@click.option(
    "--most",
    type=click.IntRange(1, 10_000),
    default=200,
    show_default=True,
    help="Runs shown at most (the newest).",
)
def history(job: str, output: str, metric: str | None, most: int, **options: Any) -> ExitCode:
    """Show every run of a job across the branch's history, and what each reached.

    A run is a commit that changed the job's manifest (a renamed file, or the job
    moved to another file, is still the same job); its outcome, duration, GPU-hours
    and metrics come from the status notes the sync wrote. A note that status would
    refuse is skipped with a warning. Commits are named by their 7-hex short id.

    \b
    Examples:
      mxgitops history --repo https://github.com/org/jobs.git ml/mnist
      mxgitops history --repo file:///srv/git/jobs.git ml/mnist --metric accuracy
      mxgitops history --repo URL --branch develop ml/mnist -o markdown > runs.md
      mxgitops history --repo URL ml/mnist -o json | jq '.runs[0].best'
    """
    # Imported here, not above: validate needs none of them (see the imports).
    from mxgitops.commands import historyview
    from mxgitops.commands.history import history as runs_of_job
    from mxgitops.outputs.markdown import visible

    explicit = frozenset(name for name, value in options.items() if value is not None)
    config = from_options({**options, "git_token": git_token()})

    def warn(message: str) -> None:
        click.echo(f"warning: {visible(message)}", err=True)

    qualified, runs = runs_of_job(config, job, explicit=explicit, most=most, warn=warn)
    shown = historyview.shown(qualified, runs, metric)
    renderers = {
        "table": historyview.render_table,
        "markdown": historyview.render_markdown,
        "json": historyview.render_json,
    }
    click.echo(renderers[output](shown))
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
    "--notes-ref",
    metavar="REF",
    default=DEFAULT_NOTES_REF,
    show_default=True,
    help="Notes ref of the status notes, read for the changed jobs' earlier runs (a "
    "clone fetches none: git fetch origin REF:REF first).",
)
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
    notes_ref: str,
    output: str,
) -> ExitCode:
    """Show which jobs a change adds, changes and removes, and what it breaks.

    Compares the manifests of two commits of a checkout; needs no cluster.
    What a change replaces and what it patches in place depends on the runtime
    a job runs on: give --default-runtime as the operator's sync has it.
    Exits 1 when HEAD has invalid manifests. Where a changed job ran before
    (the status notes of BASE's history, if fetched), what its last run reached,
    at what cost, is told too.

    \b
    Examples:
      mxgitops diff origin/main HEAD
      mxgitops diff origin/main HEAD -o markdown > comment.md
      git fetch origin refs/notes/mxgitops:refs/notes/mxgitops   # earlier runs too
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
        notes_ref=notes_ref,
    )
    renderers = {
        "text": review.render_text,
        "markdown": review.render_markdown,
        "json": review.render_json,
    }
    click.echo(renderers[output](result))
    return ExitCode.OK if result.ok else ExitCode.FAILED
