"""`mxgitops install` given a token file that is no token (binary, megabytes, two lines):
refused in one line, before the cluster is asked anything, the content never shown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mxgitops.cli import ExitCode, main

SECRETISH = b"XXXXSECRETXXXX"


@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe" + SECRETISH,  # binary
        SECRETISH * 1_000_000,  # 14 MB
        SECRETISH + b"\nX-Injected: " + SECRETISH,  # a second line: a header's worth
        b"\n\n",
    ],
    ids=["binary", "huge", "two-lines", "empty"],
)
def test_a_token_file_that_is_no_token_is_refused_in_one_line(
    tmp_path: Path, kubeapi: Any, content: bytes
) -> None:
    token = tmp_path / "token"
    token.write_bytes(content)
    args = ["install", "--repo", "https://git.example/org/jobs.git", "--token-file", str(token)]
    args += ["--image", "registry.example.com/m:1", "--kubeconfig", str(kubeapi.kubeconfig)]
    kubeapi.clear_log()
    result = CliRunner().invoke(main, args, env={"MXGITOPS_CACHE_DIR": str(tmp_path / "c")})
    assert result.exit_code == ExitCode.USAGE, result.output
    (line,) = result.output.splitlines()
    assert "--token-file" in line and len(line) < 300
    assert "XXXXSECRETXXXX" not in line
    assert kubeapi.request_log == []
