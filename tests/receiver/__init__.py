"""Tests of mxgitops/receiver/: the webhook receiver and the Jobs it starts."""
