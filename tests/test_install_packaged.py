"""The kustomize base and components install renders ship inside the package
(mxgitops/install/kustomize/, package data), and are the repository's cronjob/ ones
byte for byte: the manual documents cronjob/, install applies the copy, so they must
not drift. After editing cronjob/base or a component install offers, copy it again:
    cp -r cronjob/base cronjob/components/receiver cronjob/components/jobset \\
        (base into mxgitops/install/kustomize/, the components into its components/)
"""

from __future__ import annotations

from pathlib import Path

from mxgitops.install.overlay import BASE, COMPONENTS, KUSTOMIZE

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = {"base": BASE, "components/receiver": COMPONENTS / "receiver"}
PACKAGED["components/jobset"] = COMPONENTS / "jobset"


def files(directory: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def test_the_packaged_manifests_are_cronjobs() -> None:
    for name, packaged in PACKAGED.items():
        assert files(packaged) == files(ROOT / "cronjob" / name), name


def test_the_package_holds_only_what_install_renders() -> None:
    held = {str(p.relative_to(KUSTOMIZE)) for p in KUSTOMIZE.rglob("*") if p.is_file()}
    assert held == {f"{name}/{file}" for name, d in PACKAGED.items() for file in files(d)}
