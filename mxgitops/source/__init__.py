"""The git edge: the cache clone a sync reads, and its notes."""
