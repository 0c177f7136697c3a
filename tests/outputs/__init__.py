"""Tests of mxgitops/outputs/: the report, the sinks, notes, forges, Events and metrics."""
