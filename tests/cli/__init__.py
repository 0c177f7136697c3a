"""Tests of mxgitops/cli/: the commands' options, output and exit codes."""
