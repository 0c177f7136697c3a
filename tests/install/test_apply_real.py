"""install's apply (mxgitops/install/apply.py) on the real control plane, where
server-side apply and its managed fields are the API server's own (the double has
neither).

Two installations in two namespaces each keep their own cluster-scoped ClusterRole and
ClusterRoleBinding: the second neither takes over nor, uninstalled, deletes the first's.
A field install set and no longer renders on an object that stays (a Secret's key
whose flag was dropped) is sent, and the server removes it; with the same flags
nothing is written, every component on (their ports' defaulted protocols included)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mxgitops.install import run
from mxgitops.install.apply import apply
from mxgitops.install.overlay import CRONJOB, INSTALL_LABEL, Installation
from mxgitops.kube.cluster import Cluster, connect
from tests.controlplane.harness import RealCluster, wait_for
from tests.install.test_real import writes

REPO = "https://git.example.com/org/jobs.git"
IMAGE = "registry.example.com/team/mxgitops:0.2.0"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


@pytest.fixture
def cluster(control_plane: RealCluster) -> Iterator[Cluster]:
    """mxgitops' connection, as install's (the audit log's CLIENT); what the test
    installed is uninstalled after it, and its namespaces gone."""
    made: list[str] = []
    yield connect(kubeconfig=control_plane.kubeconfig)
    done = connect(kubeconfig=control_plane.kubeconfig)
    for namespace in ("mxgitops-first", "mxgitops-second", "mxgitops-dropped"):
        run.uninstall(done, namespace, jobs=False, echo=made.append)
    for namespace in ("mxgitops-first", "mxgitops-second", "mxgitops-dropped"):
        wait_for(
            f"namespace {namespace} to go",
            lambda n=namespace: (
                control_plane.raw("GET", f"/api/v1/namespaces/{n}")[0] == 404 or None
            ),
            timeout=120,
        )


def binding_subjects(control_plane: RealCluster) -> dict[str, list[str]]:
    """Each ClusterRoleBinding of mxgitops' ServiceAccount: its name -> the namespaces
    of the ServiceAccounts it binds, with the role it grants and install's label."""
    found = {}
    for binding in control_plane.rest.get(f"{RBAC}/clusterrolebindings")["items"]:
        subjects = [
            s["namespace"]
            for s in binding.get("subjects") or []
            if s["kind"] == "ServiceAccount" and s["name"] == CRONJOB
        ]
        if subjects:
            label = binding["metadata"].get("labels", {}).get(INSTALL_LABEL)
            found[binding["metadata"]["name"]] = [*subjects, binding["roleRef"]["name"], label]
    return found


def test_a_second_installation_keeps_to_its_own_cluster_objects(
    control_plane: RealCluster, cluster: Cluster
) -> None:
    first = Installation(repo=REPO, image=IMAGE, namespace="mxgitops-first", queues=True)
    second = Installation(repo=REPO, image=IMAGE, namespace="mxgitops-second")
    said: list[str] = []
    apply(cluster, first, echo=said.append)
    apply(cluster, second, echo=said.append)
    assert binding_subjects(control_plane) == {
        "mxgitops-mxgitops-first": ["mxgitops-first", "mxgitops-mxgitops-first", "mxgitops-first"],
        "mxgitops-mxgitops-second": [
            "mxgitops-second",
            "mxgitops-mxgitops-second",
            "mxgitops-second",
        ],
    }
    role = control_plane.rest.get(f"{RBAC}/clusterroles/mxgitops-mxgitops-first")
    assert any("jobset.x-k8s.io" in rule["apiGroups"] for rule in role["rules"])  # --queues'
    run.uninstall(cluster, "mxgitops-second", jobs=False, echo=said.append)
    assert list(binding_subjects(control_plane)) == ["mxgitops-mxgitops-first"]
    assert not apply(cluster, first, echo=said.append), "the first installation is as it was"


def secret_keys(control_plane: RealCluster, namespace: str) -> set[str]:
    secret = control_plane.rest.get(f"/api/v1/namespaces/{namespace}/secrets/mxgitops-git")
    return set(secret["data"])


def test_a_dropped_field_is_removed_and_the_same_flags_write_nothing(
    control_plane: RealCluster, cluster: Cluster, tmp_path: Path
) -> None:
    files: dict[str, Any] = {}
    for name in ("token", "key", "known_hosts"):
        files[name] = tmp_path / name
        files[name].write_text(f"the {name}\n")
    every = Installation(
        repo=REPO,
        image=IMAGE,
        namespace="mxgitops-dropped",
        receiver=True,
        dashboard=True,
        queues=True,
        token_file=files["token"],
        ssh_key=files["key"],
        known_hosts=files["known_hosts"],
        webhook_secret_file=files["token"],
    )
    said: list[str] = []
    assert apply(cluster, every, echo=said.append)
    control_plane.clear_log()
    assert not apply(cluster, every, echo=said.append)
    assert writes(control_plane) == []
    assert secret_keys(control_plane, "mxgitops-dropped") == {
        "token",
        "ssh-privatekey",
        "known_hosts",
    }

    fewer = dataclasses.replace(every, ssh_key=None, known_hosts=None)
    changes = apply(cluster, fewer, echo=said.append)
    assert "Secret mxgitops-dropped/mxgitops-git configured" in changes.applied
    assert ("patch", "secrets") in {(w["verb"], w["resource"]) for w in writes(control_plane)}
    assert secret_keys(control_plane, "mxgitops-dropped") == {"token"}
    control_plane.clear_log()
    assert not apply(cluster, fewer, echo=said.append)
    assert writes(control_plane) == []
