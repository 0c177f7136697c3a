"""`mxgitops render`: print the Kubernetes objects each job of some manifests becomes."""

from __future__ import annotations

from pathlib import Path

import click

from mxgitops.cli.app import ExitCode, main
from mxgitops.cli.checking import load_like_sync
from mxgitops.cli.options import (
    default_runtime_setting,
    max_file_size_option,
    namespace_option,
    policy_file_option,
)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@namespace_option
@max_file_size_option
@policy_file_option
@default_runtime_setting
@click.option(
    "--instance",
    default="default",
    show_default=True,
    metavar="NAME",
    help="The mxgitops instance the objects would belong to (their ownership labels).",
)
@click.option(
    "--accelerators-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The operator's accelerators file, as sync takes it.  [default: none]",
)
@click.option(
    "--output",
    "-o",
    type=click.Choice(["yaml", "json"]),
    default="yaml",
    show_default=True,
    help="A YAML stream, or one JSON v1 List.",
)
def render(
    paths: tuple[str, ...],
    namespace: str | None,
    max_file_size: int,
    policy_file: Path | None,
    default_runtime: str | None,
    instance: str,
    accelerators_file: Path | None,
    output: str,
) -> ExitCode:
    """Print the Kubernetes objects each job under PATHS becomes, as a sync creates them.

    Each valid job is rendered for the runtime it would run on: batch Jobs and a
    scheduler Service, or one JobSet (a job that names a queue, or any dist job
    under --default-runtime jobset). Problems go to stderr, and make the exit
    status 1; the valid jobs are printed all the same. No cluster is asked.

    \b
    Examples:
      mxgitops render jobs/resnet.yaml
      mxgitops render jobs/ | kubectl diff -f -
      mxgitops render -o json jobs/ | kubectl apply --dry-run=server -f -
    """
    from mxgitops.commands import render as rendering
    from mxgitops.runtimes.shared.accelerators import parse_accelerators
    from mxgitops.settings.config import read_accelerators

    loaded = load_like_sync(paths, namespace, max_file_size, policy_file, default_runtime)
    raw = read_accelerators(accelerators_file) if accelerators_file else {}
    rendered = rendering.render_loaded(
        loaded, instance=instance, accelerators=parse_accelerators(raw, where="accelerators")
    )
    text = rendering.as_json if output == "json" else rendering.as_yaml
    click.echo(text(rendered.objects), nl=False)
    for problem in sorted(loaded.problems, key=lambda p: (p.file, p.line)):
        click.echo(str(problem), err=True)
    return ExitCode.OK if not loaded.problems else ExitCode.FAILED
