"""jobs-repo-example/: standalone, its CI script, synced onto a cluster."""
