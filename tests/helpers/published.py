"""Helpers of `tests/manifests/test_published.py` that other test modules use too."""

from __future__ import annotations

import re
from pathlib import Path

CORPUS = Path(__file__).parents[1] / "data" / "published"


FILES = sorted(CORPUS.glob("*.yaml"))


_HEADER = re.compile(r"^# (origin|expect|warns):(.*)$")


def header(path: Path) -> dict[str, str]:
    """The header's fields; a line starting with "#   " continues the field above."""
    fields: dict[str, str] = {}
    last = ""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        match = _HEADER.match(line)
        if match:
            last = match.group(1)
            fields[last] = match.group(2).strip()
        elif line.startswith("#   ") and last:
            fields[last] += " " + line[4:].strip()
    return fields
