"""The test session's order and its xdist worker groups."""
