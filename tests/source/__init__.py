"""Tests of mxgitops/source/: the jobs repository over real git."""
