"""Tests of mxgitops/record/: the training record read from a run's logs and pods."""
