"""Tests of mxgitops/runtimes/: rendering and status of each runtime, and their protocol."""
