"""mxgitops: run distributed MXNet training on Kubernetes from a Git repository."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    __version__: str


def __getattr__(name: str) -> str:
    """`__version__`, read from the installed package's metadata on first use only:
    importlib.metadata (and the email package it imports) would cost every command,
    `mxgitops validate FILE` included, at startup (docs/development: measurements)."""
    if name == "__version__":
        return _installed_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@cache
def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mxgitops")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0+unknown"
