"""The Secrets install makes from files (mxgitops/install/apply.py): a token's file is
read as the token (an editor's final newline dropped: it would otherwise be part of
MXGITOPS_GIT_TOKEN, and the first sync's fetch fails with exit 3, as it did on the real
parts), a key's file byte for byte; each Secret in install's namespace with its label."""

from __future__ import annotations

import base64
from pathlib import Path

from mxgitops.install.apply import secrets
from mxgitops.install.overlay import INSTALL_LABEL, Installation

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----\n"


def test_a_token_file_is_the_token_and_a_key_file_is_kept_whole(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("ghp_0123456789\n")
    (tmp_path / "key").write_text(KEY)
    (tmp_path / "webhook").write_text("  s3cret \n")
    installation = Installation(
        repo="https://git.example.com/org/jobs.git",
        image="m:1",
        namespace="ml-gitops",
        receiver=True,
        token_file=tmp_path / "token",
        ssh_key=tmp_path / "key",
        webhook_secret_file=tmp_path / "webhook",
    )
    made = {s["metadata"]["name"]: s for s in secrets(installation)}
    decoded = {
        name: {key: base64.b64decode(value).decode() for key, value in s["data"].items()}
        for name, s in made.items()
    }
    assert decoded == {
        "mxgitops-git": {"token": "ghp_0123456789", "ssh-privatekey": KEY},
        "mxgitops-webhook": {"secret": "s3cret"},
    }
    for secret in made.values():
        assert secret["metadata"]["namespace"] == "ml-gitops"
        assert secret["metadata"]["labels"] == {INSTALL_LABEL: "ml-gitops"}
