"""The cluster install exactly as docs/getting-started/cluster.md says: copy the example
overlay, edit the copy as step 2 lists (namespace, nameSuffix, the Namespace's name,
MXGITOPS_INSTANCE and MXGITOPS_REPO, the image by registry and digest), then
`kubectl kustomize` and `kubectl apply --dry-run=server -k` on the real control plane:
the CronJob runs the image named in the copy, and nothing else names one.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml

from tests.controlplane.harness import RealCluster
from tests.helpers.cronjob import CRONJOB, Docs, only, pod_template

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_PAGE = ROOT / "docs/getting-started/cluster.md"
REGISTRY_IMAGE = "registry.example.com/mxgitops"
DIGEST = "sha256:" + "0123456789abcdef" * 4
REPO = "https://git.example.com/org/jobs.git"


def edit(path: Path, old: str, new: str) -> None:
    """One edit a person makes with an editor: `old` is there exactly once."""
    text = path.read_text()
    assert text.count(old) == 1, f"{path.name}: {old!r} found {text.count(old)} times"
    path.write_text(text.replace(old, new))


def copied_and_edited(tmp_path: Path, instance: str) -> Path:
    """cluster.md step 2: `cp -r cronjob/overlays/example cronjob/overlays/prod`, then
    the edits it lists, in a copy of the repository's cronjob/."""
    tree = tmp_path / "cronjob"
    shutil.copytree(CRONJOB, tree)
    overlay = tree / "overlays" / instance
    shutil.copytree(tree / "overlays/example", overlay)
    kustomization = overlay / "kustomization.yaml"
    edit(kustomization, "namespace: mxgitops-example", f"namespace: mxgitops-{instance}")
    edit(kustomization, "nameSuffix: -example", f"nameSuffix: -{instance}")
    edit(kustomization, "newName: ghcr.io/example/mxgitops", f"newName: {REGISTRY_IMAGE}")
    edit(kustomization, 'newTag: "0.1.0"', f"digest: {DIGEST}")
    edit(overlay / "namespace.yaml", "name: mxgitops-example", f"name: mxgitops-{instance}")
    config = overlay / "config.env"
    edit(config, "MXGITOPS_INSTANCE=example", f"MXGITOPS_INSTANCE={instance}")
    edit(config, "MXGITOPS_REPO=https://github.com/example/mxnet-jobs.git", f"MXGITOPS_REPO={REPO}")
    return overlay


def kubectl(*args: str) -> str:
    return subprocess.run(
        ["kubectl", *args], check=True, capture_output=True, text=True, timeout=60
    ).stdout


def test_the_page_lists_the_edits_this_test_makes() -> None:
    """The edits below are the page's: each key it edits is named in step 2."""
    step = CLUSTER_PAGE.read_text().split("2. Make an overlay", 1)[1].split("3. Install", 1)[0]
    for named in ("namespace", "nameSuffix", "MXGITOPS_INSTANCE", "MXGITOPS_REPO", "newName"):
        assert f"`{named}" in step, named
    assert "`digest: sha256:" in step and "`newTag`" in step


def test_the_copied_overlay_runs_the_image_it_names(
    control_plane: RealCluster, tmp_path: Path
) -> None:
    overlay = copied_and_edited(tmp_path, "prod")
    docs: Docs = [d for d in yaml.safe_load_all(kubectl("kustomize", str(overlay))) if d]
    (container,) = pod_template(docs)["spec"]["containers"]
    assert container["image"] == f"{REGISTRY_IMAGE}@{DIGEST}"
    assert only(docs, "CronJob")["metadata"] == {
        **only(docs, "CronJob")["metadata"],
        "name": "mxgitops-prod",
        "namespace": "mxgitops-prod",
    }
    # The server's answer: every object of the overlay, the CronJob with that image.
    control_plane.ensure_namespace("mxgitops-prod")
    applied = kubectl(
        "--kubeconfig", str(control_plane.kubeconfig),
        "apply", "--dry-run=server", "-k", str(overlay), "-o", "yaml",
    )  # fmt: skip
    items = yaml.safe_load(applied)["items"]
    cronjob = only(items, "CronJob")
    (served,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert served["image"] == f"{REGISTRY_IMAGE}@{DIGEST}"
    assert cronjob["metadata"]["namespace"] == "mxgitops-prod"
    assert {i["kind"] for i in items} >= {"Namespace", "CronJob", "ClusterRoleBinding"}


def test_only_the_overlay_names_the_image() -> None:
    """One place names the image: the base's container says `mxgitops`, a name for the
    overlay's `images:` to match, and no kustomization under cronjob/ but the overlays'
    renames it."""
    for kustomization in CRONJOB.rglob("kustomization.yaml"):
        names = re.findall(r"^\s*newName:", kustomization.read_text(), re.MULTILINE)
        overlay = kustomization.parent.parent.name == "overlays"
        assert bool(names) == overlay, kustomization.relative_to(CRONJOB)


def test_cronjob_comments_point_to_pages_that_exist() -> None:
    """The comments of cronjob/ name the manual's pages (docs/...md), which exist; the
    README's sections they once named moved to docs/."""
    for path in sorted(p for p in CRONJOB.rglob("*") if p.suffix in (".yaml", ".env")):
        text = path.read_text()
        assert "README:" not in text, path.relative_to(ROOT)
        for page in re.findall(r"docs/[\w/.-]+\.md", text):
            assert (ROOT / page).is_file(), f"{path.relative_to(ROOT)}: {page}"


def test_the_supported_versions_are_the_tested_ones() -> None:
    """The manual's "Tested on"/"Kubernetes 1.34" is the minor version of the real
    control plane every end-to-end test runs on."""
    from tests.controlplane.build import KUBERNETES_VERSION

    tested = ".".join(KUBERNETES_VERSION.lstrip("v").split(".")[:2])
    page = CLUSTER_PAGE.read_text()
    assert f"**Supported versions, as tested**: Kubernetes {tested} (" in page
    assert f"real\ncontrol plane and node of {KUBERNETES_VERSION}" in page
    assert f"Tested on Kubernetes {tested} " in (ROOT / "README.md").read_text()
