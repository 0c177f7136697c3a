"""Every published MXJob shape gets its own verdict (tests/data/published/).

Each file says where its shape was published and what mxgitops must make of it
(`# expect:` and `# warns:`, see the folder's README). Every training-job
example validates; tuning jobs and `kubectl get` dumps are refused with their
own messages; every older version says what it was read as.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mxgitops.manifests.dialects import VERSIONS
from mxgitops.manifests.loading import load
from tests.helpers.published import FILES, header


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_published_shape_gets_its_verdict(path: Path) -> None:
    expected = header(path)
    assert expected.get("origin"), f"{path.name} names no origin"
    result = load(path)
    verdict = expected["expect"]
    if verdict == "valid":
        assert result.ok, [str(p) for p in result.problems]
        assert len(result.jobs) == 1
    else:
        assert verdict.startswith("refused: "), verdict
        assert not result.ok and result.jobs == []
        assert verdict.removeprefix("refused: ") in result.problems[0].message, str(
            result.problems[0]
        )
    warns = [f.strip() for f in expected.get("warns", "").split(",") if f.strip()]
    assert sorted(w.field for w in result.warnings) == sorted(warns), [
        str(w) for w in result.warnings
    ]


def test_the_corpus_covers_every_version_and_both_refusals() -> None:
    api_versions = {f.read_text().split("apiVersion:", 1)[1].split()[0].strip('"') for f in FILES}
    assert api_versions == {v.api_version for v in VERSIONS.values()}
    verdicts = " ".join(header(f)["expect"] for f in FILES)
    assert "MXTune" in verdicts and "kubectl get" in verdicts
