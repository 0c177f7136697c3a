"""Planning: diff(desired, live, ledger) -> Plan, pure."""
