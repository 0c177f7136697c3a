"""Build Gitea (code.gitea.io/gitea, the version gomod/go.mod pins), once per version.

``python -m tests.gitea.build`` prints the directory holding `gitea` and the files it
serves from disk (templates, options, public): without the `bindata` tag, whose
generated sources are not in the module, Gitea reads them from its static root, so
they are copied from the module next to the binary. SQLite is mattn/go-sqlite3, which
needs cgo (the `sqlite sqlite_unlock_notify` tags of Gitea's own Makefile).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from tests.builds import gobuild

GOMOD_DIR = Path(__file__).with_name("gomod")
MODULE = "code.gitea.io/gitea"
VERSION = gobuild.pinned_version(GOMOD_DIR, MODULE)
CACHE_ENV = "MXGITOPS_GITEA_CACHE"
BUILD = 1  # of _compile below
EXPECTED = ("gitea", "templates", "options", "public")


def _compile(staging: Path) -> None:
    env = {**os.environ, "CGO_ENABLED": "1", "GOFLAGS": "-mod=readonly"}
    flags = f"-s -w -X main.Version={VERSION.removeprefix('v')}"
    command = ["go", "build", "-trimpath", "-tags", "sqlite sqlite_unlock_notify"]
    command += [f"-ldflags={flags}", "-o", str(staging / "gitea"), MODULE]
    gobuild.run("gitea", command, cwd=GOMOD_DIR, env=env)
    listed = ["go", "list", "-m", "-f", "{{.Dir}}", MODULE]
    module_dir = Path(gobuild.run("gitea", listed, cwd=GOMOD_DIR, env=env).strip())
    for part in EXPECTED[1:]:
        shutil.copytree(module_dir / part, staging / part)
        for path in (staging / part).rglob("*"):  # the module cache's files are read-only
            path.chmod(0o755 if path.is_dir() else 0o644)


def ensure_built() -> Path:
    # Bump BUILD when _compile changes what it builds.
    key = gobuild.build_key(f"{VERSION}-{BUILD}", GOMOD_DIR / "go.mod", GOMOD_DIR / "go.sum")
    return gobuild.ensure_built(gobuild.cache_root("gitea", CACHE_ENV), key, EXPECTED, _compile)


if __name__ == "__main__":
    print(ensure_built())
    sys.exit(0)
