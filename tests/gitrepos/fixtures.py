"""Real git for tests: bare remotes in tmp_path, and a loopback HTTP git server.

Nothing here mocks git. A `GitRemote` is a bare repository plus a work clone that pushes
to it with the `git` binary, reachable by `file://` URL or, through `GitHttpServer`, by
`http://` with Basic authentication (`git http-backend` run as CGI by a thread).

Fixtures, for any test module (import them, or list this module in `pytest_plugins`):

- `git_isolation`: git ignores the user's global and system config (autouse is up to you).
- `make_git_remote(name="jobs", files=None, branch="main")`: a new remote with one commit.
- `make_git_http_server(root, logins={("user", "password")})`: serves every bare
  repository under `root`; with logins, other requests get 401.

A fixture of a wider scope (a session's installation) uses the plain functions behind
them: `isolate_git` on a `pytest.MonkeyPatch.context()`, `new_git_remote`, and a
`GitHttpServer` it starts and stops itself.
"""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
}
_REPOSITORY_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")


def run_git(*args: str, cwd: Path, input: bytes | None = None) -> str:
    """Run the git binary in `cwd`; raise with stderr on failure; return stripped stdout."""
    done = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr.decode()}")
    return done.stdout.decode().strip()


@dataclass
class GitRemote:
    """A bare repository (`bare`) and a work clone (`work`) that pushes to it."""

    bare: Path
    work: Path
    branch: str = "main"

    @property
    def url(self) -> str:
        return self.bare.as_uri()

    def git(self, *args: str) -> str:
        return run_git(*args, cwd=self.work)

    def commit(self, files: Mapping[str, str | None], message: str = "change") -> str:
        """Write (or with None, delete) files in the work clone, commit, push; the sha."""
        for name, content in files.items():
            path = self.work / name
            if content is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        self.git("add", "--all")
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        self.push()
        return self.rev()

    def push(self, *, force: bool = False) -> None:
        self.git(
            "push", "--quiet", *(["--force"] if force else []), "origin", f"HEAD:{self.branch}"
        )

    def rewrite_last_commit(self, files: Mapping[str, str | None]) -> str:
        """Replace the tip with a different commit and force-push it: history rewritten."""
        self.git("reset", "--quiet", "--hard", "HEAD~1")
        for name, content in files.items():
            (self.work / name).write_text(content or "")
        self.git("add", "--all")
        self.git("commit", "--quiet", "-m", "rewritten")
        self.push(force=True)
        return self.rev()

    def switch(self, branch: str) -> None:
        """Commit and push to `branch` from now on (created from the current commit)."""
        self.git("checkout", "--quiet", "-B", branch)
        self.branch = branch

    def tag(self, name: str, rev: str = "HEAD") -> None:
        self.git("tag", "-a", "-m", name, name, rev)
        self.git("push", "--quiet", "origin", f"refs/tags/{name}")

    def rev(self, rev: str = "HEAD") -> str:
        return self.git("rev-parse", rev)

    def note(self, commit: str, notes_ref: str = "refs/notes/mxgitops") -> str | None:
        """The note on `commit` as the remote has it."""
        done = subprocess.run(
            ["git", "notes", f"--ref={notes_ref}", "show", commit],
            cwd=self.bare,
            capture_output=True,
            check=False,
        )
        return done.stdout.decode() if done.returncode == 0 else None

    def refs(self) -> str:
        """Every ref of the remote with its target, to compare before and after."""
        return run_git("for-each-ref", "--format=%(refname) %(objectname)", cwd=self.bare)


def isolate_git(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """Through ``monkeypatch``: git sees a fresh global config in ``home`` with an
    identity, and no system config."""
    config = home / "gitconfig"
    config.write_text('[init]\n\tdefaultBranch = main\n[protocol "file"]\n\tallow = always\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    for name, value in GIT_IDENTITY.items():
        monkeypatch.setenv(name, value)
    for name in _REPOSITORY_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def git_isolation(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Git sees a fresh global config with an identity, and no system config."""
    isolate_git(monkeypatch, tmp_path_factory.mktemp("git-home"))


def new_git_remote(
    root: Path, name: str = "jobs", files: Mapping[str, str] | None = None, branch: str = "main"
) -> GitRemote:
    """A bare remote under root/remotes with one commit of `files`; call it with git
    isolated (`isolate_git`)."""
    bare = root / "remotes" / f"{name}.git"
    work = root / "work" / name
    bare.parent.mkdir(parents=True, exist_ok=True)
    run_git("init", "--quiet", "--bare", f"--initial-branch={branch}", str(bare), cwd=root)
    work.parent.mkdir(parents=True, exist_ok=True)
    run_git("clone", "--quiet", bare.as_uri(), str(work), cwd=root)
    remote = GitRemote(bare=bare, work=work, branch=branch)
    remote.git("checkout", "--quiet", "-B", branch)
    remote.commit(files or {"jobs/a.yaml": "name: a\n"}, "initial")
    return remote


@pytest.fixture
def make_git_remote(tmp_path: Path, git_isolation: None) -> Callable[..., GitRemote]:
    """Factory: a bare remote under tmp_path/remotes with one commit of `files`."""

    def make(
        name: str = "jobs", files: Mapping[str, str] | None = None, branch: str = "main"
    ) -> GitRemote:
        return new_git_remote(tmp_path, name, files, branch)

    return make


@dataclass
class GitHttpServer:
    """Smart-HTTP git over loopback: Basic auth checked here, the rest by http-backend."""

    root: Path
    logins: set[tuple[str, str]] = field(default_factory=set)
    host: str = "127.0.0.1"  # or an address pods reach (the real node's host end)
    authorizations: list[str] = field(default_factory=list)  # every Authorization seen
    paths: list[str] = field(default_factory=list)  # every request path, for assertions
    _server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    def url(self, name: str, userinfo: str = "") -> str:
        at = f"{userinfo}@" if userinfo else ""
        return f"http://{at}{self.host}:{self.port}/{name}.git"

    def start(self) -> None:
        # Bound to port 0 by the constructor: listening before the thread starts, no race.
        self._server = ThreadingHTTPServer((self.host, 0), _handler_for(self))
        serve = self._server.serve_forever
        threading.Thread(target=serve, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def allows(self, authorization: str | None) -> bool:
        if not self.logins:
            return True
        if not authorization or not authorization.startswith("Basic "):
            return False
        user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
        return (user, password) in self.logins


def _handler_for(server: GitHttpServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._serve(b"")

        def do_POST(self) -> None:
            self._serve(self._body())

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: test output stays readable."""

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                return self.rfile.read(int(self.headers.get("Content-Length", 0)))
            chunks = []
            while size := int(self.rfile.readline().strip(), 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)

        def _serve(self, body: bytes) -> None:
            authorization = self.headers.get("Authorization")
            server.authorizations.append(authorization or "")
            server.paths.append(self.path)
            if not server.allows(authorization):
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._reply(_run_http_backend(server.root, self.command, self.path, self.headers, body))

        def _reply(self, output: bytes) -> None:
            separator = b"\r\n\r\n" if b"\r\n\r\n" in output else b"\n\n"
            head, _, payload = output.partition(separator)
            headers = [line.split(":", 1) for line in head.decode().splitlines() if ":" in line]
            status = next((int(v.split()[0]) for k, v in headers if k.lower() == "status"), 200)
            self.send_response(status)
            for key, value in headers:
                if key.lower() != "status":
                    self.send_header(key, value.strip())
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def _run_http_backend(root: Path, method: str, path: str, headers: Message, body: bytes) -> bytes:
    path_info, _, query = path.partition("?")
    env = {
        **os.environ,
        "GIT_PROJECT_ROOT": str(root),
        "GIT_HTTP_EXPORT_ALL": "1",
        "REMOTE_USER": "tester",  # authenticated above; lets receive-pack run
        "REMOTE_ADDR": "127.0.0.1",
        "REQUEST_METHOD": method,
        "PATH_INFO": path_info,
        "QUERY_STRING": query,
        "CONTENT_TYPE": headers.get("Content-Type", ""),
        "CONTENT_LENGTH": str(len(body)),
        "GIT_PROTOCOL": headers.get("Git-Protocol", ""),
        "HTTP_CONTENT_ENCODING": headers.get("Content-Encoding", ""),
    }
    done = subprocess.run(
        ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
    )
    return done.stdout


@pytest.fixture
def make_git_http_server(git_isolation: None) -> Iterator[Callable[..., GitHttpServer]]:
    """Factory: a started GitHttpServer over `root`; all are stopped at teardown."""
    started: list[GitHttpServer] = []

    def make(
        root: Path, logins: set[tuple[str, str]] | None = None, host: str = "127.0.0.1"
    ) -> GitHttpServer:
        server = GitHttpServer(root=root, logins=logins or set(), host=host)
        server.start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()
