"""The kustomize base and components install renders ship inside the package
(mxgitops/install/kustomize/, package data), and the repository's cronjob/ names the
same files through symbolic links: one copy, which the manual documents (cronjob/),
kustomize overlays build on and install applies."""

from __future__ import annotations

from pathlib import Path

from mxgitops.install.overlay import BASE, COMPONENTS, KUSTOMIZE

ROOT = Path(__file__).resolve().parents[2]
PACKAGED = {"base": BASE, "components/receiver": COMPONENTS / "receiver"}
PACKAGED["components/jobset"] = COMPONENTS / "jobset"
PACKAGED["components/dashboard"] = COMPONENTS / "dashboard"


def files(directory: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def test_the_packaged_manifests_are_cronjobs() -> None:
    for name, packaged in PACKAGED.items():
        documented = ROOT / "cronjob" / name
        assert documented.is_symlink(), f"cronjob/{name} is a second copy"
        assert documented.resolve() == packaged.resolve(), name
        assert files(packaged) == files(documented), name


def test_the_package_holds_only_what_install_renders() -> None:
    held = {str(p.relative_to(KUSTOMIZE)) for p in KUSTOMIZE.rglob("*") if p.is_file()}
    assert held == {f"{name}/{file}" for name, d in PACKAGED.items() for file in files(d)}
