"""Tests of mxgitops/manifests/: loading, dialects, spec rules, policy, Pod Security."""
