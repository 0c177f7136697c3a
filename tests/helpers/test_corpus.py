"""tests/helpers/corpus.py: the own fixtures always, the external corpus where present,
one line where it is absent, and CI=true refusing its absence. Each case is a pytest
session of its own over a small test module, the corpus pointed at tmp_path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.corpus import CHECKOUT, OWN, Shape, corpora, external_present

USES_THE_CORPUS = """\
import pytest
from tests.helpers import corpus

@pytest.mark.parametrize("examples", corpus.params())
def test_each(examples):
    assert examples.files()
"""
DEADLINE = 120  # a pytest of its own on two busy cores


def session(tmp_path: Path, external: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_uses_the_corpus.py").write_text(USES_THE_CORPUS)
    environment = {name: value for name, value in os.environ.items() if name != "CI"}
    environment |= {
        "PYTHONPATH": str(CHECKOUT),
        "PYTEST_ADDOPTS": "",  # the outer session's options are not this one's
        "MXGITOPS_TEST_EXTERNAL_CORPUS": str(external),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.helpers.corpus", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-v", "test_uses_the_corpus.py"],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=DEADLINE,
    )  # fmt: skip


def test_an_absent_external_corpus_is_said_once_and_fails_nothing(tmp_path: Path) -> None:
    done = session(tmp_path, tmp_path / "absent")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_each[own] PASSED" in done.stdout
    assert "[external]" not in done.stdout  # not generated: neither run nor skipped
    assert "skipped" not in done.stdout
    said = [line for line in done.stdout.splitlines() if line.startswith("external corpus:")]
    assert said == [
        f"external corpus: not beside the checkout ({tmp_path / 'absent'} is missing): "
        "the example tests ran over the project's own fixtures only"
    ]


def test_a_present_external_corpus_judges_too_and_is_not_mentioned(tmp_path: Path) -> None:
    external = tmp_path / "upstream"
    external.mkdir()
    (external / "job.yaml").write_text(OWN.path(Shape.SEED_LOCAL).read_text())
    done = session(tmp_path, external)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_each[own] PASSED" in done.stdout
    assert "test_each[external] PASSED" in done.stdout
    assert "external corpus:" not in done.stdout


def test_under_ci_an_absent_external_corpus_fails_the_session(tmp_path: Path) -> None:
    done = session(tmp_path, tmp_path / "absent", CI="true")
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert f"CI runs the external corpus too: {tmp_path / 'absent'} is missing" in done.stderr


def test_the_own_fixtures_come_first_and_always() -> None:
    assert corpora()[0] is OWN
    assert len(corpora()) == (2 if external_present() else 1)
    for shape in Shape:
        assert OWN.path(shape).is_file(), shape
