"""`mxgitops check`: before a first sync, what this machine, the jobs repository and the
cluster lack (preflight.py). The checks are imported inside the command: validate needs
none of them (tests/cli/test_lazy_imports.py)."""

from __future__ import annotations

from typing import Any

import click

from mxgitops.cli.app import ExitCode, exit_code_for, main
from mxgitops.cli.options import (
    context_setting,
    git_token,
    kubeconfig_setting,
    namespace_setting,
    notes_setting,
    path_setting,
    repo_options,
    request_timeout_setting,
)

_CHECK_EXAMPLES = """
\b
Examples:
  mxgitops check --repo https://github.com/org/jobs.git --kubeconfig ~/.kube/config
  MXGITOPS_GIT_TOKEN=... mxgitops check --repo https://github.com/org/jobs.git --context prod

\b
Exit codes: 0 nothing missing; else the code of the first problem, as a sync would
end on it: 1 a prerequisite missing (StorageClass, namespace, Python, kustomize),
2 a configuration error, 3 the repository cannot be read or pushed to,
4 the cluster is unreachable or refuses the credential.
"""


@main.command(epilog=_CHECK_EXAMPLES)
@repo_options
@path_setting
@namespace_setting
@kubeconfig_setting
@context_setting
@notes_setting
@request_timeout_setting
@click.pass_context
def check(ctx: click.Context, /, **options: Any) -> ExitCode:
    """Check what an installation needs before the first sync.

    Prints one line per check: ok, unknown (cannot tell, and why) or problem
    (what is missing and how to fix it): Python 3.11 or later, kustomize 5 or
    later (kubectl's own, as `kubectl apply -k` uses it), the jobs repository
    readable and the credential allowed to push the status notes (a scratch
    ref is pushed and deleted), the cluster reachable, a default StorageClass
    for the Git cache's PersistentVolumeClaim, and every namespace the
    repository's jobs go to. Nothing in the cluster is changed.
    """
    from mxgitops.cli.syncing import explicit_settings
    from mxgitops.commands.preflight import State
    from mxgitops.commands.preflight import check as run_checks
    from mxgitops.settings.config import from_options

    explicit = explicit_settings(ctx, options)
    findings = run_checks(from_options({**options, "git_token": git_token()}), explicit=explicit)
    for finding in findings:
        click.echo(str(finding))
    problems = [f.error for f in findings if f.state is State.PROBLEM and f.error is not None]
    return exit_code_for(problems[0]) if problems else ExitCode.OK
