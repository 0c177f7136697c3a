"""`mxgitops validate` and `mxgitops convert`: manifests checked and rewritten on a laptop.

Only what `validate` needs is imported at the top: `mxgitops validate FILE` must start in
well under 0.3 s. What only another command needs (convert's round-trip YAML)
is imported inside that command; tests/cli/test_lazy_imports.py keeps it so.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from mxgitops.cli.app import ExitCode, main
from mxgitops.cli.options import (
    default_runtime_setting,
    max_file_size_option,
    namespace_option,
    output_option,
    policy_file_option,
)
from mxgitops.manifests.loading import LoadResult
from mxgitops.settings.config import read_repo_settings
from mxgitops.settings.reading import load_repository, of_flags, repository_of_paths

# `mxgitops convert --to`: the keys of convert.TARGETS, named here so that the option
# is defined without importing convert (ruamel.yaml); a test checks that they agree.
CONVERT_TARGETS = ("kubeflow", "seed")


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@namespace_option
@max_file_size_option
@policy_file_option
@default_runtime_setting
@output_option
@click.option("--strict", is_flag=True, help="Fail on warnings too.")
def validate(
    paths: tuple[str, ...],
    namespace: str | None,
    max_file_size: int,
    policy_file: Path | None,
    default_runtime: str | None,
    output: str,
    strict: bool,
) -> ExitCode:
    """Check job manifests without touching a cluster.

    Reads every *.yaml and *.yml file under PATHS (default: the `path:` of
    the current directory's .mxgitops.yaml, as sync reads it, else the current
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

    PATHS are read with the .mxgitops.yaml of the repository they are in (the
    nearest one above them, within their checkout), wherever validate is run; a
    PATH that is that repository is read at its `path:`, as sync reads it.

    \b
    Examples:
      mxgitops validate
      mxgitops validate jobs/vision/resnet.yaml
      mxgitops validate --namespace ml-training -o json .
    """
    result = load_like_sync(paths, namespace, max_file_size, policy_file, default_runtime)
    if output == "json":
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        for finding in sorted([*result.problems, *result.warnings], key=lambda p: (p.file, p.line)):
            click.echo(str(finding))
        for ignored in result.ignored:
            click.echo(str(ignored))
        click.echo(result.summary())
    return ExitCode.OK if result.passes(strict=strict) else ExitCode.FAILED


def load_like_sync(
    paths: tuple[str, ...],
    namespace: str | None,
    max_file_size: int,
    policy_file: Path | None,
    default_runtime: str | None,
) -> LoadResult:
    """The manifests under PATHS read as a sync of their repository reads them (its
    .mxgitops.yaml names the default namespace and the policy; `repository_of_paths`
    finds it), and what it may not set is reported with the manifests' problems."""
    root, paths = repository_of_paths(paths)
    repo_file = read_repo_settings(root)
    # No PATHS: the repository's own `path:`, read and named as sync reads it.
    read = of_flags(
        repo_file,
        path=None,
        namespace=namespace,
        policy_file=policy_file,
        max_file_size=max_file_size,
        default_runtime=default_runtime,
    )
    return load_repository(root, read, paths=paths)


@main.command(name="convert")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
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

    FILES may be directories: their manifest files holding a job are converted, as
    validate reads them (hidden files skipped). An editor's
    `# yaml-language-server: $schema=` comment is pointed at the new version's
    schema (or dropped if it names another schema than mxgitops').
    Comments, key order and quoting are kept wherever the YAML library allows;
    `kubectl get` output is cleaned. Each job is listed on stderr, with a note
    when its spec changes (a sync then replaces it once). Documents of other
    kinds are left as they are. Exits 1, writing nothing, if a manifest is
    invalid or cannot be expressed in the target.

    \b
    Examples:
      mxgitops convert jobs/old-mxjob.yaml            print it as kubeflow.org/v1
      mxgitops convert -w jobs/                       rewrite every job under jobs/ in place
      mxgitops convert --to seed jobs/local.yaml
    """
    from mxgitops.commands import convert  # ruamel.yaml: imported by this command only

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
