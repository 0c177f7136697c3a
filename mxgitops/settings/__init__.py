"""The settings of a sync: one value from flags, environment and the repository's
.mxgitops.yaml.
"""
