"""Where the example manifests the tests read are, and whether the external ones are there.

The project's own fixtures (``tests/data/manifests/``) are always there: every test that
asserts on the shapes the MXNet operators published (spec hashes kept across versions,
convert round trips, the default policy, rendering, the first sync) runs over them.
The external corpus (``shared/examples/upstream`` beside the checkout, which CI lays
there; elsewhere with ``MXGITOPS_TEST_EXTERNAL_CORPUS``) is an extra judge: where it is
present the same tests run over it too, with ids that say which (``own``,
``external``); where it is absent its cases are not generated, and the session says so
once, in one line. Under ``CI=true`` its absence is a usage error, as the real
backend's is (``tests/kubeapi/fixtures.py``): CI must not pass on half the judges.

Registered by ``tests/conftest.py`` through ``pytest_plugins`` (the line and the CI check).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
OWN_ROOT = CHECKOUT / "tests" / "data" / "manifests"
# Elsewhere with MXGITOPS_TEST_EXTERNAL_CORPUS (this module's tests point it at tmp_path).
EXTERNAL_ROOT = Path(
    os.environ.get("MXGITOPS_TEST_EXTERNAL_CORPUS")
    or CHECKOUT.parent / "shared" / "examples" / "upstream"
)


class Shape(Enum):
    """The published shapes both corpora hold one manifest of."""

    KUBEFLOW_DIST_GPU = "Kubeflow v1 dist GPU"
    BYTEPS_DIST_GPU = "BytePS dist GPU"
    TUNE_GPU = "MXTune GPU"
    SEED_DIST = "the seed's v1beta1 dist"
    SEED_LOCAL = "the seed's v1beta1 local"


@dataclass(frozen=True)
class Example:
    file: str
    job: str


@dataclass(frozen=True)
class Corpus:
    name: str  # the parametrised id
    root: Path
    examples: dict[Shape, Example]

    def __getitem__(self, shape: Shape) -> Example:
        return self.examples[shape]

    def path(self, shape: Shape) -> Path:
        return self.root / self.examples[shape].file

    def files(self) -> list[Path]:
        """Every manifest file of the corpus, sorted by name."""
        return sorted(self.root.glob("*.yaml"))

    def trainable(self) -> list[Path]:
        """The files of the jobs mxgitops runs: all but the tuning job."""
        return [p for p in self.files() if p.name != self.examples[Shape.TUNE_GPU].file]


OWN = Corpus(
    "own",
    OWN_ROOT,
    {
        Shape.KUBEFLOW_DIST_GPU: Example("kubeflow-v1-dist-gpu.yaml", "cifar-dist"),
        Shape.BYTEPS_DIST_GPU: Example("kubeflow-v1-byteps-dist-gpu.yaml", "byteps-resnet"),
        Shape.TUNE_GPU: Example("kubeflow-v1-tune-gpu.yaml", "tune-resnet"),
        Shape.SEED_DIST: Example("mlkube-v1beta1-dist.yaml", "seed-dist"),
        Shape.SEED_LOCAL: Example("mlkube-v1beta1-local.yaml", "seed-local"),
    },
)
EXTERNAL = Corpus(
    "external",
    EXTERNAL_ROOT,
    {
        Shape.KUBEFLOW_DIST_GPU: Example("kubeflow-v1-mx_job_dist_gpu_v1.yaml", "mxnet-job"),
        Shape.BYTEPS_DIST_GPU: Example("kubeflow-v1-byteps_dist_gpu_v1.yaml", "byteps-mxnet-job"),
        Shape.TUNE_GPU: Example("kubeflow-v1-mx_job_tune_gpu_v1.yaml", "auto-tuning-job"),
        Shape.SEED_DIST: Example("mlkube-v1beta1-dist.yaml", "example-dist-job"),
        Shape.SEED_LOCAL: Example("mlkube-v1beta1-local.yaml", "example-local-job"),
    },
)


def external_present() -> bool:
    return EXTERNAL_ROOT.is_dir()


def corpora() -> list[Corpus]:
    """The own fixtures, then the external corpus where it is present."""
    return [OWN, EXTERNAL] if external_present() else [OWN]


def params() -> list[object]:
    """`corpora()` as pytest parameters, with ids that say which."""
    return [pytest.param(corpus, id=corpus.name) for corpus in corpora()]


def root_params() -> list[object]:
    """Each corpus's directory as a pytest parameter, with ids that say which."""
    return [pytest.param(corpus.root, id=corpus.name) for corpus in corpora()]


def file_params(*, trainable_only: bool = False) -> list[object]:
    """One parameter per file of each corpus (the tuning job's left out with
    `trainable_only`), with ids such as ``own/mlkube-v1beta1-dist.yaml``."""
    return [
        pytest.param(path, id=label(path))
        for corpus in corpora()
        for path in (corpus.trainable() if trainable_only else corpus.files())
    ]


def label(path: Path) -> str:
    """A test id for `path`: ``own/NAME`` or ``external/NAME`` for a corpus's file (the
    two hold files of the same names), the bare name for any other."""
    for corpus in (OWN, EXTERNAL):
        if path.parent == corpus.root:
            return f"{corpus.name}/{path.name}"
    return path.name


def each_file() -> Iterator[Path]:
    """Every file of every corpus present."""
    for corpus in corpora():
        yield from corpus.files()


ABSENT = (
    f"external corpus: not beside the checkout ({EXTERNAL_ROOT} is missing): "
    "the example tests ran over the project's own fixtures only"
)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("CI") == "true" and not external_present():
        raise pytest.UsageError(f"CI runs the external corpus too: {EXTERNAL_ROOT} is missing")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not external_present():
        terminalreporter.write_line(ABSENT)
