"""Tests of mxgitops/kube/: the client, its transport, reads, writes and lists."""
