"""The operator's notifications file: where each chat lives and what it wants to hear.

`--notifications-file` (`MXGITOPS_NOTIFICATIONS_FILE`), never the jobs repository: a
webhook address is a credential. YAML with `notifications:` (one entry per
destination) and an optional `dashboardURL`. A destination's address (and the
`generic-hmac` key) is read from a file, a mounted Secret's key, beside the
notifications file when relative; neither is ever shown. A misspelt key, provider or
event is one line with a did-you-mean, as in `.mxgitops.yaml`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mxgitops.errors import ConfigError
from mxgitops.manifests.files import read_text
from mxgitops.manifests.yamldoc import YamlError, documents
from mxgitops.words import did_you_mean

MAX_FILE_SIZE = 64 * 1024
MAX_DESTINATIONS = 32
MAX_SECRET_FILE = 4096
MAX_URL = 2048
PROVIDERS = ("slack", "msteams", "discord", "googlechat", "mattermost", "generic", "generic-hmac")
EVENTS = ("failed", "succeeded", "disrupted", "waiting", "sync-failed")
DEFAULT_EVENTS = ("failed", "disrupted", "sync-failed")
DEFAULT_WAITING_AFTER = timedelta(minutes=30)
TOP_KEYS = ("notifications", "dashboardURL", "timeout")
DEFAULT_TIMEOUT = timedelta(seconds=10)
MAX_TIMEOUT = timedelta(seconds=60)
KEYS = (
    "name",
    "provider",
    "addressFile",
    "secretFile",
    "events",
    "waitingAfter",
    "namespaces",
    "jobs",
)
# What each key means, for the settings reference (scripts/generate_reference.py).
DESCRIPTIONS = {
    "notifications": "The destinations: a list of mappings with the keys below.",
    "dashboardURL": "The dashboard's address: each job's message links "
    "`{dashboardURL}/jobs/NAMESPACE/NAME`.",
    "timeout": "Longest one destination's POST may take, the whole of it; all of them "
    "together take at most three times that (default 10s, at most 60s).",
    "name": "The destination's name in messages and logs (default `PROVIDER-INDEX`); "
    "its address never shows.",
    "provider": "One of " + ", ".join(f"`{p}`" for p in PROVIDERS) + ".",
    "addressFile": "File holding the webhook's URL (http or https), a mounted Secret's "
    "key; a relative path is read beside the notifications file.",
    "secretFile": "`generic-hmac` only: file holding the key of the `X-Signature` HMAC.",
    "events": "What the destination hears: "
    + ", ".join(f"`{e}`" for e in EVENTS)
    + " (default "
    + ", ".join(f"`{e}`" for e in DEFAULT_EVENTS)
    + ").",
    "waitingAfter": "How long a job is queued or pending before `waiting` is told "
    "(default 30m; such as 45m, 2h, 1h30m).",
    "namespaces": "Globs of the namespaces whose jobs it hears (default: all).",
    "jobs": "Globs of the job names it hears (default: all).",
}
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


@dataclass(frozen=True)
class Destination:
    name: str  # in messages and the outbox: never the address
    provider: str
    address: str = ""  # the webhook URL, from addressFile: never shown
    secret: bytes = b""  # generic-hmac's key, from secretFile: never shown
    events: tuple[str, ...] = DEFAULT_EVENTS
    waiting_after: timedelta = DEFAULT_WAITING_AFTER
    namespaces: tuple[str, ...] = ()  # globs; empty: every namespace
    jobs: tuple[str, ...] = ()  # globs of job names; empty: every job

    def __repr__(self) -> str:  # the address and the secret stay out of any trace
        return f"Destination({self.name!r}, {self.provider!r})"

    def wants(self, event: str, namespace: str = "", name: str = "") -> bool:
        """Whether this destination hears `event` of the job `namespace/name` ("" for
        what concerns no job: an invalid manifest, heard only by a destination that
        selects no namespace nor job)."""
        if event not in self.events:
            return False
        if not namespace:
            return not self.namespaces and not self.jobs
        return _matches(namespace, self.namespaces) and _matches(name, self.jobs)


@dataclass(frozen=True)
class Notifications:
    destinations: tuple[Destination, ...]
    dashboard_url: str = ""  # {dashboardURL}/jobs/NS/NAME
    timeout: timedelta = DEFAULT_TIMEOUT  # one destination's POST, the whole of it

    def job_link(self, namespace: str, name: str) -> str:
        if not self.dashboard_url:
            return ""
        return f"{self.dashboard_url.rstrip('/')}/jobs/{namespace}/{name}"


def _matches(value: str, globs: tuple[str, ...]) -> bool:
    return not globs or any(fnmatchcase(value, glob) for glob in globs)


def read_file(path: Path) -> Notifications:
    """The notifications file at `path`, its addresses and secrets read; ConfigError, one
    line naming the file and the key, when anything of it is wrong."""
    where = f"notifications file {path}"
    try:
        docs = list(documents(read_text(path, MAX_FILE_SIZE), max_values=10_000, max_depth=8))
    except YamlError as error:
        line = f" (line {error.line})" if error.line else ""
        raise ConfigError(f"{where}{line}: {error.message}") from error
    data = docs[0].data if len(docs) == 1 else None
    if not isinstance(data, dict) or "notifications" not in data:
        raise ConfigError(f"{where}: must be one YAML mapping with a notifications list")
    for key in data:
        if key not in TOP_KEYS:
            raise ConfigError(
                f"{where}: {_key(key)}: not a key of this file{did_you_mean(key, TOP_KEYS)} "
                f"(known: {', '.join(TOP_KEYS)})"
            )
    entries = data["notifications"]
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{where}: notifications: expected a list of destinations")
    if len(entries) > MAX_DESTINATIONS:
        raise ConfigError(f"{where}: notifications: more than {MAX_DESTINATIONS} destinations")
    dashboard = data.get("dashboardURL", "")
    if dashboard and not _is_http_url(dashboard):
        raise ConfigError(f"{where}: dashboardURL: expected an http or https URL")
    destinations = tuple(
        _destination(entry, f"{where}: notifications[{n}]", path.parent, n)
        for n, entry in enumerate(entries)
    )
    names = [d.name for d in destinations]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ConfigError(f"{where}: notifications: the name {twice!r} is given twice")
    timeout = _duration(data.get("timeout", "10s"), f"{where}: timeout")
    if not timedelta(0) < timeout <= MAX_TIMEOUT:
        raise ConfigError(f"{where}: timeout: more than 0 and at most {MAX_TIMEOUT.seconds}s")
    return Notifications(destinations, str(dashboard or ""), timeout)


def _destination(raw: object, where: str, base: Path, index: int) -> Destination:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping ({', '.join(KEYS)})")
    for key in raw:
        if key not in KEYS:
            raise ConfigError(
                f"{where}.{_key(key)}: not a key of a destination{did_you_mean(key, KEYS)} "
                f"(known: {', '.join(KEYS)})"
            )
    provider = raw.get("provider")
    if provider not in PROVIDERS:
        raise ConfigError(
            f"{where}.provider: {_shown(provider)} is no provider"
            f"{did_you_mean(provider, PROVIDERS)} (known: {', '.join(PROVIDERS)})"
        )
    name = raw.get("name", f"{provider}-{index}")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{where}.name: expected lower-case letters, digits and '-' (40 at most)")
    if "addressFile" not in raw:
        raise ConfigError(f"{where}.addressFile: missing (the file of the webhook's URL)")
    # Bytes that are not UTF-8 are refused as not a URL, below: never a crash.
    data = _secret_file(raw["addressFile"], f"{where}.addressFile", base)
    address = data.decode("utf-8", "replace").strip()
    if not _is_http_url(address) or "\ufffd" in address:
        raise ConfigError(f"{where}.addressFile: its content is not an http or https URL")
    secret = b""
    if provider == "generic-hmac":
        if "secretFile" not in raw:
            raise ConfigError(f"{where}.secretFile: missing (generic-hmac signs with its key)")
        secret = _secret_file(raw["secretFile"], f"{where}.secretFile", base).strip()
    elif "secretFile" in raw:
        raise ConfigError(f"{where}.secretFile: only generic-hmac signs its messages")
    return Destination(
        name=name,
        provider=str(provider),
        address=address,
        secret=secret,
        events=_events(raw.get("events", list(DEFAULT_EVENTS)), f"{where}.events"),
        waiting_after=_duration(raw.get("waitingAfter", "30m"), f"{where}.waitingAfter"),
        namespaces=_globs(raw.get("namespaces", []), f"{where}.namespaces"),
        jobs=_globs(raw.get("jobs", []), f"{where}.jobs"),
    )


def _events(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: expected a list of events ({', '.join(EVENTS)})")
    for event in value:
        if event not in EVENTS:
            raise ConfigError(
                f"{where}: {_shown(event)} is no event{did_you_mean(event, EVENTS)} "
                f"(known: {', '.join(EVENTS)})"
            )
    return tuple(e for e in EVENTS if e in value)


def _duration(value: object, where: str) -> timedelta:
    match = _DURATION.match(value) if isinstance(value, str) and value else None
    if match is None or not any(match.groups()):
        raise ConfigError(f"{where}: expected a duration such as 30m, 2h or 1h30m")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return timedelta(hours=hours, minutes=minutes, seconds=seconds)


def _globs(value: object, where: str) -> tuple[str, ...]:
    ok = isinstance(value, list) and all(isinstance(v, str) and 0 < len(v) <= 253 for v in value)
    if not ok or not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list of names or globs (ml-*)")
    return tuple(value)


def _secret_file(value: object, where: str, base: Path) -> bytes:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a file's path")
    path = Path(value) if Path(value).is_absolute() else base / value
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_SECRET_FILE + 1)
    except OSError as exc:  # its name is the operator's, its content is never said
        raise ConfigError(f"{where}: {path} cannot be read ({exc.strerror})") from None
    if len(data) > MAX_SECRET_FILE:
        raise ConfigError(f"{where}: {path} is larger than {MAX_SECRET_FILE} bytes")
    if not data.strip():
        raise ConfigError(f"{where}: {path} is empty")
    return data


def _is_http_url(value: object) -> bool:
    if not isinstance(value, str) or len(value) > MAX_URL or any(c.isspace() for c in value):
        return False
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _key(value: Any) -> str:
    text = str(value)
    return text if re.fullmatch(r"[A-Za-z0-9_.-]{1,60}", text) else _shown(value)


def _shown(value: Any) -> str:
    text = str(value)
    return repr(text[:60] + ("…" if len(text) > 60 else ""))
