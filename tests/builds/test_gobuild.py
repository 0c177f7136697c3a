"""How a built part is found (``tests/builds/gobuild.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builds import gobuild


def test_a_built_part_is_found_without_building_and_read_ahead_once_a_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "v1-abc"
    target.mkdir()
    (target / "server").write_bytes(b"\x7fELF" * (3 * gobuild.READ_CHUNK // 4 + 1))
    (target / "client").write_bytes(b"")
    reads: list[tuple[str, int]] = []
    real_open = Path.open

    def recording_open(path: Path, *args: Any, **kwargs: Any) -> Any:
        file = real_open(path, *args, **kwargs)
        real_readinto = file.readinto

        class Recorded:
            def readinto(self, buffer: bytearray) -> int:
                count: int = real_readinto(buffer)
                reads.append((path.name, count))
                return count

            def __enter__(self) -> Recorded:
                return self

            def __exit__(self, *exc: object) -> None:
                file.close()

        return Recorded()

    def never(staging: Path) -> None:
        raise AssertionError("a built part is not built again")

    monkeypatch.setattr(Path, "open", recording_open)
    for _ in range(2):
        assert gobuild.ensure_built(tmp_path, "v1-abc", ("server", "client"), never) == target
    chunk = gobuild.READ_CHUNK
    assert reads == [
        ("server", chunk),
        ("server", chunk),
        ("server", chunk),
        ("server", 4),
        ("server", 0),
        ("client", 0),
    ]
