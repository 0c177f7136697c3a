"""The differences from Kubeflow's training operator kept on purpose: the rows of the
table in README.md ("Coming from Kubeflow's training operator"), read from it, so a
difference the suite finds passes only if the README names it, with its reason."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "### Differences kept on purpose"
_ROW = re.compile(r"^\| `([a-z0-9-]+)` \|")


def kept_differences(text: str) -> frozenset[str]:
    """The ids of the table's rows (its first column, in backticks)."""
    _, found, rest = text.partition(SECTION)
    if not found:
        raise AssertionError(f"{README} has no section {SECTION!r}")
    rows = []
    for line in rest.splitlines()[1:]:
        if line.startswith("#"):
            break
        match = _ROW.match(line)
        if match:
            rows.append(match.group(1))
    return frozenset(rows)


KEPT = kept_differences(README.read_text())
