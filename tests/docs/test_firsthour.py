"""Pages a new user reads in the first hour (issue 47) say what is true and what to do.

The faults page leads with what you see and what you do, its tests and measured times
in a details section, each test it names there; the Pending page no longer says a
job's `queue` is not acted on; `cronjob/components/multikueue` is named as examples
(no kustomize component), each file of it listed, with the namespaces the manager needs.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAULTS = ROOT / "docs" / "concepts" / "faults.md"
MULTIKUEUE = ROOT / "cronjob" / "components" / "multikueue"


def tables(page: Path) -> list[list[list[str]]]:
    """Each markdown table of `page`: its rows, each row's cells."""
    found: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*page.read_text(encoding="utf-8").splitlines(), ""]:
        if line.startswith("|"):
            current.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
        elif current:
            found.append(current)
            current = []
    return found


def test_the_faults_table_says_what_you_do_and_keeps_its_tests_for_the_details() -> None:
    by_header = {tuple(table[0]): table[2:] for table in tables(FAULTS)}
    main = by_header[("fault", "what you see", "what mxgitops does", "what you do")]
    details = by_header[("fault", "test", "recovery (measured)")]
    assert len(main) >= 20 and all(row[3] for row in main)
    assert not any("tests/" in cell or "::test_" in cell for row in main for cell in row)
    assert [row[0] for row in main] == [row[0] for row in details]
    text = FAULTS.read_text(encoding="utf-8")
    assert text.index("| what you do |") < text.index("### Details: tests and measured recovery")
    named = {m for row in details for m in re.findall(r"`(tests/[\w/]+\.py)::", row[1])}
    assert named and all((ROOT / path).is_file() for path in named), named


def test_the_pending_page_no_longer_says_queue_is_not_acted_on() -> None:
    page = (ROOT / "docs" / "guides" / "troubleshooting" / "pending.md").read_text()
    assert "(`minAvailable`, `queue`) are not acted on" not in page
    assert "Queued" in page and "../queues.md" in page


def test_the_multikueue_directory_is_named_as_examples_with_the_managers_namespaces() -> None:
    assert not (MULTIKUEUE / "kustomization.yaml").exists()
    readme = (MULTIKUEUE / "README.md").read_text(encoding="utf-8")
    assert "not a kustomize component" in readme
    for manifest in sorted(MULTIKUEUE.glob("*.yaml")):
        assert f"`{manifest.name}`" in readme, manifest.name
    for namespace in ("kueue-system", "team-a"):
        assert f"`{namespace}`" in readme.split("Namespaces the **manager** needs")[1]
    guide = (ROOT / "docs" / "guides" / "multicluster.md").read_text(encoding="utf-8")
    assert "not a kustomize component" in guide and "`kueue-system`" in guide
