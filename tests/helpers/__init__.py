"""What several test modules share, one module per concept (jobs, a sync, a sync through
Git, the JobSet runtime, cronjob/, the policy, the real node, the faults, the corpus). A
test module imports from here, never from another test module (pytest rewrites the
asserts here too: tests/conftest.py)."""
