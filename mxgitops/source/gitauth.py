"""Authenticating to a Git remote without ever exposing a secret.

A token or password reaches git only through environment variables (an
``http.<url>.extraHeader`` passed as ``GIT_CONFIG_*``, or ``GIT_SSH_COMMAND``):
never on a command line, in the cache's ``.git/config``, in a log or an error.
`redact` is applied to everything git says before anyone sees it. This module
runs nothing; `source/repository.py` runs git with what it prepares.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

# Who writes the notes commits of the cache; no user or global git config is needed.
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "mxgitops",
    "GIT_AUTHOR_EMAIL": "mxgitops@localhost",
    "GIT_COMMITTER_NAME": "mxgitops",
    "GIT_COMMITTER_EMAIL": "mxgitops@localhost",
}
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s'\"<>]*)@")


@dataclass(frozen=True)
class Credentials:
    """How to authenticate to the remote; the config layer fills it, never from argv."""

    token: str | None = None
    ssh_key: Path | None = None
    known_hosts: Path | None = None


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every secret and every password in a URL replaced by ``***``.

    In http(s) URLs a user name without a password is redacted too: that is how
    tokens are usually embedded (``https://TOKEN@host/repo.git``). Host and path stay.
    """
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return _URL_USERINFO.sub(_redact_userinfo, text)


def _redact_userinfo(match: re.Match[str]) -> str:
    scheme, userinfo = match["scheme"], match["userinfo"]
    user, has_password, _ = userinfo.partition(":")
    if has_password:
        return f"{scheme}{user}:***@"
    if user and scheme.lower().startswith("http"):
        return f"{scheme}***@"
    return match.group(0)


@dataclass(frozen=True)
class Remote:
    url: str  # what git sees and .git/config stores: never a password
    display: str  # what people see
    auth_scope: str | None  # "https://host:port/": the only place the header is sent
    auth_header: str | None
    secrets: tuple[str, ...]

    @classmethod
    def parse(cls, url: str, credentials: Credentials) -> Remote:
        if "://" not in url:
            return cls._local_or_scp(url, credentials)
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
        user, password = parts.username or "", parts.password
        secrets = {credentials.token or "", password or "", unquote(password or "")}
        if parts.scheme.lower() not in ("http", "https"):
            netloc = f"{user}@{host}" if user else host
            plain = urlunsplit(parts._replace(netloc=netloc))
            return cls(plain, redact(url, secrets), None, None, _secret_tuple(secrets))
        if password is None and user and not credentials.token:  # https://TOKEN@host/...
            secrets |= {user, unquote(user)}
        header = _basic_auth(unquote(user), unquote(password or ""), credentials.token)
        if header:
            secrets.add(header.removeprefix("Authorization: Basic "))
        plain = urlunsplit(parts._replace(netloc=host))
        scope = f"{parts.scheme}://{host}/"
        return cls(plain, redact(url, secrets), scope, header, _secret_tuple(secrets))

    @classmethod
    def _local_or_scp(cls, url: str, credentials: Credentials) -> Remote:
        secrets = _secret_tuple({credentials.token or ""})
        scp_like = re.match(r"[^/]*:", url) is not None and not Path(url).exists()
        plain = url if scp_like else str(Path(url).expanduser().resolve())
        return cls(plain, plain, None, None, secrets)


def _secret_tuple(secrets: set[str]) -> tuple[str, ...]:
    return tuple(sorted(s for s in secrets if s))


def _basic_auth(user: str, password: str, token: str | None) -> str | None:
    """The Authorization header for http(s): URL credentials first, then the token."""
    if password or (user and not token):
        pair = f"{user}:{password}"
    elif token:
        pair = f"{user or 'x-access-token'}:{token}"
    else:
        return None
    return "Authorization: Basic " + base64.b64encode(pair.encode()).decode()


# Below this many bytes a second for the timeout's length, an HTTP transfer is given up.
LOW_SPEED_LIMIT = 1000


def git_environment(
    remote: Remote, credentials: Credentials, *, timeout: float = 30.0
) -> dict[str, str]:
    """Everything git needs, passed by environment so nothing secret is written or listed.
    `timeout` (seconds) bounds a silent connection: HTTP's low-speed limit, ssh's connect
    timeout and keep-alives; the whole command's deadline is `gitcommand`'s."""
    seconds = max(1, round(timeout))
    config = [
        ("core.hooksPath", os.devnull),  # the cache is a mirror: no user hooks run in it
        ("advice.detachedHead", "false"),
        ("http.lowSpeedLimit", str(LOW_SPEED_LIMIT)),
        ("http.lowSpeedTime", str(seconds)),
    ]
    if remote.auth_header and remote.auth_scope:
        config.append((f"http.{remote.auth_scope}.extraHeader", remote.auth_header))
    env = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_COUNT": str(len(config)), **GIT_IDENTITY}
    for index, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    ssh = _ssh_command(credentials, seconds)
    if ssh:
        env["GIT_SSH_COMMAND"] = ssh
    return env


def _ssh_command(credentials: Credentials, seconds: int) -> str | None:
    """ssh with the credentials and a bounded wait for a silent server (connecting, and
    three unanswered keep-alives a third of the timeout apart); None when there are no
    credentials to give and the user's environment names an ssh command of its own."""
    options = []
    if credentials.ssh_key:
        options += ["-i", str(credentials.ssh_key), "-o", "IdentitiesOnly=yes"]
    if credentials.known_hosts:
        options += ["-o", f"UserKnownHostsFile={credentials.known_hosts}"]
        options += ["-o", "StrictHostKeyChecking=yes"]
    if not options and ("GIT_SSH_COMMAND" in os.environ or "GIT_SSH" in os.environ):
        return None
    options += ["-o", f"ConnectTimeout={seconds}"]
    options += ["-o", f"ServerAliveInterval={max(1, seconds // 3)}", "-o", "ServerAliveCountMax=3"]
    return shlex.join(["ssh", *options, "-o", "BatchMode=yes"])
