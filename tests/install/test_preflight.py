"""`mxgitops install` stops before anything is applied when check's preflight finds a
problem: one line per problem, the exit code a sync would meet, and not one write in
the API's request log (the API double: nothing of install's kinds is served there, so a
write would show as a request)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from mxgitops.cli import ExitCode, main
from tests.gitrepos.fixtures import GitRemote

READS = ("GET",)
# The installing user's rights are asked with SelfSubjectAccessReviews: a POST that
# stores nothing.
ASKS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def writes(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in log if r["method"] not in READS and r["path"] != ASKS]


def test_a_wrong_token_stops_install_before_any_write(
    tmp_path: Path, kubeapi: Any, make_git_remote: Any, make_git_http_server: Any
) -> None:
    remote: GitRemote = make_git_remote("jobs", files={"README.md": "jobs\n"})
    server = make_git_http_server(remote.bare.parent, logins={("x-access-token", "right")})
    token = tmp_path / "token"
    token.write_text("wrong\n")
    args = [
        "install",
        "--repo",
        server.url(remote.bare.name.removesuffix(".git")),
        "--token-file",
        str(token),
    ]
    args += ["--image", "registry.example.com/m:1", "--kubeconfig", str(kubeapi.kubeconfig)]
    kubeapi.clear_log()
    result = CliRunner().invoke(main, args, env={"MXGITOPS_CACHE_DIR": str(tmp_path / "c")})
    assert result.exit_code == ExitCode.GIT, result.output
    (line,) = result.output.splitlines()
    # Refused for the token: it was sent (and is what the server said no to).
    sent = base64.b64encode(b"x-access-token:wrong").decode()
    assert f"Basic {sent}" in server.authorizations
    assert line.startswith("problem: repository: ")
    assert "wrong" not in line  # the token is never printed
    assert writes(kubeapi.request_log) == []
    assert [r["path"] for r in kubeapi.request_log if r["method"] == "POST"], "rights asked"
