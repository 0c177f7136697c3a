"""mxgitops: run distributed MXNet training on Kubernetes from a Git repository."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mxgitops")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
