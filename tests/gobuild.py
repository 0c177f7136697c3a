"""Build a Go program once per version into ~/.cache/mxgitops/<name>/<key>/.

The one way every server the tests run is built (the control plane, the training
operator, JobSet and Kueue, Gitea, the Pushgateway; the node's components share its
cache root): compiled from the Go module proxy through a wrapper module, under a
file lock (a second builder waits, then finds the result), into a staging directory
renamed into place only when complete, so an interrupted build leaves nothing that
looks finished.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def pinned_version(gomod_dir: Path, module: str) -> str:
    """The version of `module` the wrapper's go.mod requires."""
    text = (gomod_dir / "go.mod").read_text()
    found = re.search(rf"^(?:require)?\s+{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    if found is None:
        raise SystemExit(f"{gomod_dir / 'go.mod'} does not require {module}")
    return found.group(1)


# Read once, when the test session imports this module: tests that move HOME (to keep
# ~/.kube/config or ~/.gitconfig out) must still find the servers already built.
CACHE_HOME = Path.home() / ".cache" / "mxgitops"


def cache_root(name: str, env: str) -> Path:
    return Path(os.environ.get(env) or CACHE_HOME / name)


def build_key(version: str, *files: Path) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.read_bytes())
    return f"{version}-{digest.hexdigest()[:12]}"


def ensure_built(
    root: Path, key: str, expected: tuple[str, ...], compile_into: Callable[[Path], None]
) -> Path:
    """The directory `root/key` holding `expected`, compiling into it first if missing."""
    target = root / key
    if all((target / name).exists() for name in expected):
        return target
    if shutil.which("go") is None:
        raise SystemExit(f"building {root.name} needs Go (`go` is not on PATH)")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all((target / name).exists() for name in expected):
            return target
        staging = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
        try:
            compile_into(staging)
            missing = [name for name in expected if not (staging / name).exists()]
            if missing:
                raise SystemExit(f"the build produced no {', '.join(missing)} in {staging}")
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target
