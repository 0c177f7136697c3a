"""What each command does: the sync orchestrator, status and diff, validate, render and
convert, check.
"""
