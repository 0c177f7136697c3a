"""What a sync reads of the cluster to plan from, and what it writes back: apply, the
ledger's storage, the hand-off record.
"""
