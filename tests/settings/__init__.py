"""Tests of mxgitops/settings/: the settings from options and the jobs repository."""
