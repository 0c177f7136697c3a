"""`mxgitops install` and `mxgitops uninstall`: an installation from one command.

The manifests are the base and the components install offers, shipped inside the
package (kustomize/: the repository's cronjob/base and cronjob/components/receiver,
jobset and dashboard are symbolic links to them, one copy), rendered in Python
the way `kubectl kustomize` renders the overlay install describes (`overlay.py`,
`render.py`), and applied server-side under install's own field manager (`apply.py`).
"""

from __future__ import annotations

# The project's published image; install runs this version's unless --image names
# another. The release workflow (.github/workflows/release.yml) pushes it on each tag.
PUBLISHED_IMAGE = "ghcr.io/mxgitops/mxgitops"


def published_image(version: str) -> str:
    """The published image of mxgitops `version` (a source tree's 0.0.0+unknown has none
    to pull: the caller names one with --image)."""
    return f"{PUBLISHED_IMAGE}:{version}"
