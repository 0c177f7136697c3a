"""tests/session/checkoutguard.py: what a test opens or lists outside the allowed places
fails it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers.corpus import CHECKOUT, EXTERNAL_ROOT
from tests.session.checkoutguard import Confinement, allowed_roots, inside, watching

DEADLINE = 120  # a pytest of its own on two busy cores


def test_what_is_opened_or_listed_outside_is_kept_symlinks_resolved(tmp_path: Path) -> None:
    allowed, elsewhere = tmp_path / "allowed", tmp_path / "elsewhere"
    for directory in (allowed, elsewhere):
        directory.mkdir()
        (directory / "job.yaml").write_text("kind: MXJob\n")
    (allowed / "link.yaml").symlink_to(elsewhere / "job.yaml")
    with watching(Confinement((os.path.realpath(allowed),))) as confinement:
        assert (allowed / "job.yaml").read_text() == "kind: MXJob\n"
        assert sorted(allowed.glob("*.yaml"))
        assert confinement.breaches == []
        (elsewhere / "job.yaml").read_text()
        sorted(elsewhere.glob("*.yaml"))
        (allowed / "link.yaml").read_text()  # inside by name, outside in fact
        with pytest.raises(FileNotFoundError):  # tried is read: the test depends on it
            (elsewhere / "missing.yaml").read_text()
    assert confinement.take() == [
        os.path.realpath(elsewhere / "job.yaml"),
        os.path.realpath(elsewhere),
        os.path.realpath(elsewhere / "missing.yaml"),
    ]
    assert confinement.breaches == []


def test_the_session_allows_what_tests_need_and_not_the_rest() -> None:
    roots = allowed_roots()
    for path in (
        CHECKOUT / "tests" / "data" / "manifests" / "kubeflow-v1-dist-gpu.yaml",
        EXTERNAL_ROOT / "mlkube-v1beta1-dist.yaml",
        Path(tempfile.gettempdir()) / "pytest-of-someone" / "job.yaml",
        Path.home() / ".cache" / "mxgitops" / "controlplane" / "kube-apiserver",
        Path(sys.prefix) / "lib" / "site.py",
        Path("/proc/self/status"),
        Path("/usr/bin/git"),
    ):
        assert inside(os.path.realpath(path), roots), path
    for path in (Path.home() / "notes" / "job.yaml", Path("/srv/examples/job.yaml")):
        assert not inside(os.path.realpath(path), roots), path
    assert not inside("/usr2/job.yaml", ("/usr",))  # a root is a directory, not a prefix


READS = """\
import pytest

def test_reads_outside():
    with pytest.raises(OSError):
        open("/srv/mxgitops-nowhere/job.yaml")

def test_reads_its_tmp_path(tmp_path):
    (tmp_path / "job.yaml").write_text("kind: MXJob")
    assert (tmp_path / "job.yaml").read_text() == "kind: MXJob"
"""
COLLECTS = """\
try:
    open("/srv/mxgitops-nowhere/collected.yaml")
except OSError:
    pass

def test_never_runs():
    pass
"""


def test_a_test_or_module_that_reads_outside_fails_and_the_others_pass(tmp_path: Path) -> None:
    (tmp_path / "test_reads.py").write_text(READS)
    (tmp_path / "test_collects.py").write_text(COLLECTS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.session.checkoutguard",
         "-p", "no:cacheprovider", "-p", "no:xdist", "-rA", "--continue-on-collection-errors",
         "test_reads.py", "test_collects.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=DEADLINE,
        env={**os.environ, "PYTHONPATH": str(CHECKOUT), "PYTEST_ADDOPTS": ""},
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "1 failed, 1 passed, 1 error" in output, output
    assert "PASSED test_reads.py::test_reads_its_tmp_path" in output
    assert "FAILED test_reads.py::test_reads_outside" in output
    assert "read outside the checkout" in output and "/srv/mxgitops-nowhere/job.yaml" in output
    assert "ERROR test_collects.py" in output
    assert "/srv/mxgitops-nowhere/collected.yaml" in output
