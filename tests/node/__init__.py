"""Jobs that really run: the real control plane and the real node (one xdist group)."""
