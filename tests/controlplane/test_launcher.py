"""`python -m tests.controlplane`: a real control plane that kubectl can use, whose audit
log is the request log, and that leaves no process behind when it is stopped."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.controlplane.build import ensure_built

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("git_isolation")


def children(pid: int) -> set[int]:
    """Every process descended from ``pid``, read from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_standalone_control_plane(tmp_path: Path) -> None:
    kubectl = str(ensure_built() / "kubectl")
    kubeconfig, audit = tmp_path / "kubeconfig", tmp_path / "audit.log"
    started = time.monotonic()
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.controlplane",
            "--kubeconfig",
            str(kubeconfig),
            "--audit-log",
            str(audit),
            "--dir",
            str(tmp_path / "plane"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert launcher.stdout is not None
        line = launcher.stdout.readline()
        print(f"warm start: {time.monotonic() - started:.1f} s")
        assert line.startswith("ready https://127.0.0.1:"), launcher.stderr.read()
        processes = children(launcher.pid)
        assert len(processes) >= 4  # etcd, kube-apiserver, kube-controller-manager, kube-scheduler

        def run(*args: str) -> str:
            done = subprocess.run(
                [kubectl, "--kubeconfig", str(kubeconfig), *args],
                capture_output=True,
                text=True,
                check=False,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        assert "node/mxgitops-node" in run("get", "nodes,jobs", "-A", "-o", "name")
        assert run("create", "job", "x", "--image=busybox").strip() == "job.batch/x created"
        assert run("auth", "can-i", "create", "jobs").strip() == "yes"
        events = [json.loads(line) for line in audit.read_text().splitlines()]
        (create,) = [
            e
            for e in events
            if e["verb"] == "create"
            and e["requestURI"].endswith(
                "/namespaces/default/jobs?fieldManager=kubectl-create&fieldValidation=Strict"
            )
            and e["stage"] == "ResponseComplete"
        ]
        assert create["user"]["username"] == "mxgitops-test"
        assert create["responseStatus"]["code"] == 201
    finally:
        launcher.send_signal(signal.SIGTERM)
        code = launcher.wait(timeout=60)
    assert code == 0
    assert not [pid for pid in processes if alive(pid)]


def test_one_kubernetes_release_everywhere() -> None:
    """The control plane, mxgitops' pod-template schemas and the double's validation
    are one Kubernetes minor release (patch releases do not change the API)."""
    from mxgitops.manifests import schema
    from tests.controlplane.build import KUBERNETES_VERSION
    from tests.kubeapi import schema as double_schema

    def minor(version: str) -> str:
        return ".".join(version.split(".")[:2])

    assert minor(schema.KUBERNETES_VERSION) == minor(KUBERNETES_VERSION) == "v1.34"
    assert double_schema.KUBERNETES_VERSION == schema.KUBERNETES_VERSION
