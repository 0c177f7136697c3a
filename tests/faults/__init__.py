"""Faults on the real parts (issue 30): processes killed by pid, a node's network cut."""
