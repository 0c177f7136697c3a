"""A notifications file whose `addressFile` (or `secretFile`) holds what it should not:
binary bytes, a file URL, megabytes, a directory. Each is refused in one line that never
shows the content, and fails the notifications alone (`Unusable`), never the sync."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mxgitops.errors import ConfigError
from mxgitops.outputs import sinks
from mxgitops.outputs.notify.settings import read_file
from mxgitops.settings.config import SyncConfig

SECRETISH = b"XXXXSECRETXXXX"


def notifications(tmp_path: Path, address: bytes, provider: str = "slack") -> Path:
    (tmp_path / "hook.url").write_bytes(address)
    (tmp_path / "hook.key").write_bytes(b"\xff\xfe" + SECRETISH)
    entry = {"provider": provider, "addressFile": "hook.url"}
    if provider == "generic-hmac":
        entry["secretFile"] = "hook.key"
    path = tmp_path / "notifications.yaml"
    path.write_text(yaml.safe_dump({"notifications": [entry]}))
    return path


@pytest.mark.parametrize(
    "address",
    [
        b"https://\xff\xfe" + SECRETISH,  # not UTF-8
        b"\x00\x01\x02" + SECRETISH,
        b"file:///etc/" + SECRETISH,
        b"https://" + SECRETISH * 400_000,  # megabytes
        b"https://a.example/\n" + SECRETISH,
    ],
)
def test_a_hostile_address_file_is_refused_in_one_line(tmp_path: Path, address: bytes) -> None:
    path = notifications(tmp_path, address)
    with pytest.raises(ConfigError) as caught:
        read_file(path)
    said = str(caught.value)
    assert "\n" not in said and len(said) < 400
    assert "XXXXSECRETXXXX" not in said and "addressFile" in said
    (made,) = sinks.sinks_for(SyncConfig(notifications_file=path, events=False))
    assert isinstance(made, sinks.Unusable)


def test_a_binary_secret_file_is_a_key_like_any_other(tmp_path: Path) -> None:
    """An HMAC key is bytes: a binary one is read as it is."""
    made = read_file(notifications(tmp_path, b"https://a.example/hook", "generic-hmac"))
    assert made.destinations[0].secret == b"\xff\xfe" + SECRETISH
