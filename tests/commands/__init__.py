"""Tests of mxgitops/commands/: convert, check, diff and review."""
