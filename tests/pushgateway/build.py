"""Build the Prometheus Pushgateway (the version gomod/go.mod pins), once per version.

``python -m tests.pushgateway.build`` prints the directory holding `pushgateway`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.builds import gobuild

GOMOD_DIR = Path(__file__).with_name("gomod")
MODULE = "github.com/prometheus/pushgateway"
VERSION = gobuild.pinned_version(GOMOD_DIR, MODULE)
CACHE_ENV = "MXGITOPS_PUSHGATEWAY_CACHE"
BUILD = 1  # of _compile below
EXPECTED = ("pushgateway",)


def _compile(staging: Path) -> None:
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
    stamp = f"-X github.com/prometheus/common/version.Version={VERSION.removeprefix('v')}"
    command = ["go", "build", "-trimpath", f"-ldflags=-s -w {stamp}"]
    command += ["-o", str(staging / "pushgateway"), MODULE]
    gobuild.run("pushgateway", command, cwd=GOMOD_DIR, env=env)


def ensure_built() -> Path:
    # Bump BUILD when _compile changes what it builds.
    key = gobuild.build_key(f"{VERSION}-{BUILD}", GOMOD_DIR / "go.mod", GOMOD_DIR / "go.sum")
    return gobuild.ensure_built(
        gobuild.cache_root("pushgateway", CACHE_ENV), key, EXPECTED, _compile
    )


if __name__ == "__main__":
    print(ensure_built())
    sys.exit(0)
