"""The runtimes' part of the spec hash is given to the model by an entry point
(`registry.install_hash_shapes`), never as a side effect of an import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mxgitops.runtimes.registry import HASH_SHAPES, RUNTIMES

ROOT = Path(__file__).resolve().parents[2]

HASH_ONE_JOB = """
import sys
from mxgitops.manifests.spec import from_manifest
import mxgitops.runtimes.registry as registry
job = from_manifest({"apiVersion": "kubeflow.org/v1", "kind": "MXJob",
    "metadata": {"name": "a"}, "spec": {"jobMode": "MXTrain", "mxReplicaSpecs": {"Worker": {
    "replicas": 1, "template": {"spec": {"containers": [{"name": "mxnet", "image": "i"}]}}}}}})
if sys.argv[1:] == ["install"]:
    registry.install_hash_shapes()
print(job.spec_hash)
"""


def hash_in_a_fresh_process(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HASH_ONE_JOB, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_every_runtime_has_its_hash_shape() -> None:
    assert set(HASH_SHAPES) == set(RUNTIMES)


def test_importing_the_registry_installs_nothing() -> None:
    done = hash_in_a_fresh_process()
    assert done.returncode != 0
    assert "no runtime named 'batch'" in done.stderr
    assert "install_hash_shapes() was not called" in done.stderr


def test_an_entry_point_that_installs_the_shapes_hashes_the_job() -> None:
    done = hash_in_a_fresh_process("install")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.strip()) == 64  # a sha256
