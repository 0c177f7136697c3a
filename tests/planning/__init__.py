"""Tests of mxgitops/planning/: the pure plan and its rules."""
