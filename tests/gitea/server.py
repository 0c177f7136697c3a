"""A real Gitea on loopback, for the tests: built by `build.py`, run in a temp directory.

`Gitea(directory)` writes an app.ini (SQLite, INSTALL_LOCK: no installer, no SSH, no
mail, no cron), makes the database (`gitea migrate`), an admin user (`gitea admin user
create`), starts `gitea web` on a free loopback port and waits until its API answers;
`token()` asks the API for an access token, as a person would in the web UI. Gitea
refuses to run as root unless its app.ini says I_AM_BEING_UNSAFE_RUNNING_AS_ROOT,
which it does when the tests run as root (a container's default).
"""

from __future__ import annotations

import getpass
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import requests

from tests.controlplane.launcher import free_port
from tests.gitea.build import ensure_built

START_TIMEOUT = 120.0
ADMIN = "mxadmin"


class Gitea:
    """`host`: where it listens (the real node's pods reach the host's end of the node's
    network); its webhooks may be delivered to loopback and private addresses (a
    receiver on the host, or the real node's NodePort)."""

    def __init__(self, directory: Path, host: str = "127.0.0.1") -> None:
        self.directory = directory
        self.host = host
        self.port = free_port()
        self.url = f"http://{host}:{self.port}"
        self.password = secrets.token_hex(12)
        self.process: subprocess.Popen[bytes] | None = None
        self.home = ensure_built()
        self.config = directory / "app.ini"

    def __enter__(self) -> Gitea:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config.write_text(self._app_ini())
        self._gitea("migrate")
        self._gitea(
            "admin",
            "user",
            "create",
            "--username",
            ADMIN,
            "--password",
            self.password,
            "--email",
            f"{ADMIN}@example.com",
            "--admin",
            "--must-change-password=false",
        )
        self._serve()
        return self

    def _serve(self) -> None:
        """`gitea web` on the port and data made above; until its API answers."""
        self._log = open(self.directory / "gitea.log", "ab")  # noqa: SIM115 - closed in kill/__exit__
        self.process = subprocess.Popen(
            [str(self.home / "gitea"), "web", "--config", str(self.config)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self._env(),
            cwd=self.directory,
        )
        self._wait_ready()

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """The forge down: `gitea web` sent `sig` by its pid (SIGTERM: its own clean
        shutdown), waited for. `start_again` brings it back."""
        assert self.process is not None
        os.kill(self.process.pid, sig)
        self.process.wait(timeout=60)
        self._log.close()

    def start_again(self) -> None:
        """`gitea web` started again as it was (same port, same data); until it answers."""
        assert self.process is not None and self.process.poll() is not None
        self._serve()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self._log.close()

    # -- the API, as a person or a CI would use it ----------------------------------

    def api(self, method: str, path: str, *, token: str | None = None, **kwargs: Any) -> Any:
        auth = None if token else (ADMIN, self.password)
        headers = {"Authorization": f"token {token}"} if token else {}
        answer = requests.request(
            method, f"{self.url}/api/v1{path}", auth=auth, headers=headers, timeout=30, **kwargs
        )
        if answer.status_code >= 300:
            raise AssertionError(f"{method} {path}: {answer.status_code} {answer.text}")
        return answer.json() if answer.content else None

    def token(self, name: str, scopes: list[str]) -> str:
        made = self.api("POST", f"/users/{ADMIN}/tokens", json={"name": name, "scopes": scopes})
        return str(made["sha1"])

    def create_repository(self, name: str) -> str:
        """An empty repository of the admin; its clone URL (without credentials)."""
        self.api("POST", "/user/repos", json={"name": name, "private": True})
        return f"{self.url}/{ADMIN}/{name}.git"

    def combined_status(self, repository: str, commit: str, token: str) -> Any:
        return self.api("GET", f"/repos/{ADMIN}/{repository}/commits/{commit}/status", token=token)

    def statuses(self, repository: str, commit: str, token: str) -> list[Any]:
        found = self.api(
            "GET", f"/repos/{ADMIN}/{repository}/statuses/{commit}?limit=50", token=token
        )
        return list(found)

    # -- running it -------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.directory),
            "GITEA_WORK_DIR": str(self.directory),
            "USER": getpass.getuser(),
        }

    def _gitea(self, *args: str) -> None:
        done = subprocess.run(
            [str(self.home / "gitea"), *args, "--config", str(self.config)],
            capture_output=True,
            env=self._env(),
            cwd=self.directory,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"gitea {' '.join(args[:3])} failed: {done.stdout.decode()}{done.stderr.decode()}"
            )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"gitea web exited {self.process.returncode}: "
                    f"{(self.directory / 'gitea.log').read_text()[-3000:]}"
                )
            try:
                if requests.get(f"{self.url}/api/v1/version", timeout=2).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.1)  # polling a condition (the port answers), with a deadline
        raise RuntimeError(f"gitea did not answer within {START_TIMEOUT:g} s")

    def _app_ini(self) -> str:
        work, user = self.directory, getpass.getuser()
        root = "I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true\n" if os.geteuid() == 0 else ""
        return f"""APP_NAME = mxgitops tests
RUN_MODE = prod
RUN_USER = {user}
WORK_PATH = {work}
{root}
[server]
PROTOCOL = http
HTTP_ADDR = {self.host}
HTTP_PORT = {self.port}
ROOT_URL = {self.url}/
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
STATIC_ROOT_PATH = {self.home}
APP_DATA_PATH = {work}/data

[database]
DB_TYPE = sqlite3
PATH = {work}/data/gitea.db

[repository]
ROOT = {work}/repositories
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = {secrets.token_hex(32)}
INTERNAL_TOKEN = {secrets.token_urlsafe(48)}

[oauth2]
ENABLED = false

[service]
DISABLE_REGISTRATION = true

[indexer]
REPO_INDEXER_ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[webhook]
ALLOWED_HOST_LIST = loopback,private

[cron]
ENABLED = false

[mailer]
ENABLED = false

[actions]
ENABLED = false

[log]
MODE = console
LEVEL = Warn
ROOT_PATH = {work}/log
"""
