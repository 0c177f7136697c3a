"""cronjob/components/notifications over the example overlay: the file and the
webhooks' Secret are mounted where MXGITOPS_NOTIFICATIONS_FILE and the example's
addressFile say, and the example file is one the sync reads."""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from mxgitops.cli import sync
from mxgitops.outputs.notify.settings import read_file
from tests.helpers.cronjob import CRONJOB, kustomize, pod_template

COMPONENT = CRONJOB / "components/notifications"


def test_the_component_mounts_the_file_and_the_secret_it_names(tmp_path: Path) -> None:
    shutil.copytree(CRONJOB, tmp_path / "cronjob")
    overlay = tmp_path / "cronjob/overlays/example"
    shutil.copy(COMPONENT / "notifications.yaml", overlay / "notifications.yaml")
    (overlay / "slack.url").write_text("https://hooks.slack.example/services/T/B/X\n")
    kustomization = overlay / "kustomization.yaml"
    kustomization.write_text(
        kustomization.read_text()
        + "components:\n  - ../../components/notifications\n"
        + "secretGenerator:\n  - name: mxgitops-webhooks\n    files: [slack=slack.url]\n"
    )
    text = kustomization.read_text().replace(
        "configMapGenerator:\n",
        "configMapGenerator:\n  - name: mxgitops-notifications\n    files: [notifications.yaml]\n",
        1,
    )
    kustomization.write_text(text)
    docs = kustomize(overlay)
    pod = pod_template(docs)["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container.get("env", ())}
    named = PurePosixPath(env["MXGITOPS_NOTIFICATIONS_FILE"])
    assert "MXGITOPS_NOTIFICATIONS_FILE" in {p.envvar for p in sync.params}
    mounts = {m["name"]: PurePosixPath(m["mountPath"]) for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert named.parent == mounts["notifications"]
    made = {d["metadata"]["name"]: d for d in docs if d["kind"] in ("ConfigMap", "Secret")}
    config_map = made[volumes["notifications"]["configMap"]["name"]]
    secret = made[volumes["webhooks"]["secret"]["secretName"]]
    assert named.name in config_map["data"]
    assert "slack" in secret["data"]

    # The pod's files, laid out under tmp_path as the kubelet mounts them: read as sync reads.
    root = tmp_path / "pod"
    files = root / mounts["notifications"].relative_to("/")
    files.mkdir(parents=True)
    for key, value in config_map["data"].items():
        (files / key).write_text(value.replace("/etc/mxgitops/", f"{root}/etc/mxgitops/"))
    webhooks = root / mounts["webhooks"].relative_to("/")
    webhooks.mkdir(parents=True)
    (webhooks / "slack").write_text((overlay / "slack.url").read_text())
    (destination,) = read_file(root / named.relative_to("/")).destinations
    assert destination.address == "https://hooks.slack.example/services/T/B/X"
