"""The runtimes: how a job becomes Kubernetes objects and how its state is read back (the
registry, batch/, jobset/, and what they share).
"""
