"""Tests of mxgitops/commands/: convert, check, diff, review and history."""
