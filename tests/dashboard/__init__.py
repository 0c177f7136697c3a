"""Tests of mxgitops/dashboard/: its pages over HTTP and in a real browser, the command,
its component."""
