"""Whole syncs end to end: a Git remote, the API double or the real control plane."""
