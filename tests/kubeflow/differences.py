"""The differences from Kubeflow's training operator kept on purpose: the rows of the
table in the manual's page docs/getting-started/kubeflow.md ("Coming from Kubeflow's
training operator"), read from it, so a difference the suite finds passes only if the
manual names it, with its reason."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started" / "kubeflow.md"
SECTION = "\n## Differences kept on purpose\n"
_ROW = re.compile(r"^\| `([a-z0-9-]+)` \|")


def kept_differences(text: str) -> frozenset[str]:
    """The ids of the table's rows (its first column, in backticks)."""
    _, found, rest = text.partition(SECTION)
    if not found:
        raise AssertionError(f"{PAGE} has no section {SECTION.strip()!r}")
    rows = []
    for line in rest.splitlines():
        if line.startswith("#"):
            break
        match = _ROW.match(line)
        if match:
            rows.append(match.group(1))
    return frozenset(rows)


KEPT = kept_differences(PAGE.read_text(encoding="utf-8"))
