"""Tests of mxgitops/state/: applying a plan, the Lease, the ledger's storage, what a sync reads."""
