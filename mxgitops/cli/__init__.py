"""The `mxgitops` command line: click commands only, one module per family.

`app` holds the group, the exit codes and the one mapping from errors to them;
`options` the options several commands share; `checking` validate and convert, and
`rendering` render (what runs on a laptop with no cluster); `syncing` sync,
`reviewing` status, history and diff; `receiving` receive (the webhook receiver); `dashboarding`
dashboard (the read-only web page). Importing this package registers every command
on `main`.

To add a command, put it in the module of its family (or a new one imported here):

    @main.command()
    @output_option
    def sync(output: str) -> ExitCode:
        \"\"\"One line; then examples.\"\"\"
        result = run_sync(...)          # raises MxGitOpsError subclasses
        echo_result(result, output)
        return ExitCode.OK if result.ok else ExitCode.FAILED
"""

from mxgitops.cli.app import ERROR_CODES, ExitCode, Main, exit_code_for, main
from mxgitops.cli.checking import CONVERT_TARGETS, convert_command, validate
from mxgitops.cli.dashboarding import dashboard
from mxgitops.cli.installing import check
from mxgitops.cli.receiving import receive
from mxgitops.cli.rendering import render
from mxgitops.cli.reviewing import diff, history, status
from mxgitops.cli.syncing import sync

__all__ = [
    "CONVERT_TARGETS",
    "ERROR_CODES",
    "ExitCode",
    "Main",
    "check",
    "convert_command",
    "dashboard",
    "diff",
    "exit_code_for",
    "history",
    "main",
    "receive",
    "render",
    "status",
    "sync",
    "validate",
]
