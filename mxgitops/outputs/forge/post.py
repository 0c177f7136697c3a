"""Post the commit statuses a sync wants, writing only what changed.

Each commit's status is read back first, as Flux's notification controller does, and
written only when its state, description or link differ: a sync that changed nothing
writes nothing, and a commit never nears GitHub's cap of 1,000 statuses per context.
A status that cannot be posted is one line of the error this raises; the others are
still tried, until the deadline.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from mxgitops.errors import ConfigError, OutputError
from mxgitops.outputs.forge.api import Api, Refused
from mxgitops.outputs.forge.providers import PROVIDERS, PUBLIC_API
from mxgitops.outputs.forge.wanted import Wanted, context_of, wanted
from mxgitops.outputs.summary import Summary

log = logging.getLogger("mxgitops")
MAX_COMMITS = 50  # statuses read back per sync: the synced commit and 49 that submitted jobs
_HEADER_VALUE = re.compile(r"[\x21-\x7e]+")  # what a token in a header may be made of
_SCP_LIKE = re.compile(r"^[^/@]+@[^/:]+:(?P<path>.+)$")


@dataclass(frozen=True)
class StatusSettings:
    provider: str  # github, gitlab, gitea
    api_url: str
    repository: str  # owner/name (GitLab: group/subgroup/name)
    token: str = field(repr=False)
    url_template: str = ""  # {commit} and {instance} are filled in
    timeout: float = 60.0  # seconds for all of it, rate-limit waits included


@dataclass(frozen=True)
class Posting:
    posted: int = 0
    unchanged: int = 0


def settings_for(
    *,
    provider: str,
    api_url: str | None,
    repository: str | None,
    repo: str,
    token: str | None,
    url_template: str,
    timeout: float,
) -> StatusSettings:
    """The settings of `--status-provider` and its companions, checked."""
    if provider not in PROVIDERS:
        raise ConfigError(
            f"status-provider must be one of {', '.join(PROVIDERS)}, not {provider!r}"
        )
    if not token:
        raise ConfigError(
            f"status-provider {provider} needs a token: set MXGITOPS_STATUS_TOKEN or "
            "--status-token-file"
        )
    if not _HEADER_VALUE.fullmatch(token):
        raise ConfigError(
            f"status-provider {provider}: the status token holds a character an HTTP header "
            "cannot carry (a control character or a letter outside ASCII); not shown here"
        )
    name = repository or repository_of(repo)
    if not name or not re.fullmatch(r"[\w.-]+(/[\w.-]+)+", name) or _dot_segment(name):
        raise ConfigError(
            f"cannot tell the forge's repository from --repo {_safe(repo)}: set "
            "--status-repository OWNER/NAME"
        )
    base = api_url or _default_api(provider, repo)
    if not re.match(r"^https?://[^/]+", base):
        raise ConfigError(f"status-api-url {_safe(base)!r} must be an http:// or https:// URL")
    if urlsplit(base).netloc.rpartition("@")[1]:
        raise ConfigError(
            f"status-api-url {_safe(base)} must not hold credentials: the forge's token "
            "comes from MXGITOPS_STATUS_TOKEN or --status-token-file"
        )
    try:
        url_template.format(commit="", instance="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"status-url {url_template!r}: only {{commit}} and {{instance}} may be filled in"
        ) from exc
    return StatusSettings(provider, base, name, token, url_template, timeout)


def repository_of(repo: str) -> str | None:
    """`owner/name` of a Git URL: https://host/owner/name.git, git@host:owner/name.git."""
    scp = _SCP_LIKE.match(repo)
    path = scp.group("path") if scp and "://" not in repo else urlsplit(repo).path
    if "://" not in repo and not scp:
        return None
    path = path.strip("/").removesuffix(".git")
    return path if "/" in path else None


def _dot_segment(name: str) -> bool:
    """A `.` or `..` segment, which an API path would resolve."""
    return any(segment in (".", "..") for segment in name.split("/"))


def _default_api(provider: str, repo: str) -> str:
    """A Gitea's API is on the host that serves its repositories over HTTP(S)."""
    parts = urlsplit(repo)
    if provider == "gitea" and parts.scheme in ("http", "https") and parts.hostname:
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{parts.hostname}{port}/api/v1"
    return PUBLIC_API[provider]


def _safe(repo: str) -> str:
    """A URL without its credentials, to be shown."""
    parts = urlsplit(repo)
    if parts.password or parts.username:
        return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    return repo


def post(
    summary: Summary,
    settings: StatusSettings,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Posting:
    """Post what `summary` asks for; raise an OutputError naming what was not posted."""
    provider = PROVIDERS[settings.provider]
    api = Api(
        settings.api_url,
        provider.headers(settings.token),
        deadline=clock() + settings.timeout,
        clock=clock,
        sleep=sleep,
    )
    context = context_of(summary.instance)
    posted = unchanged = 0
    failures: list[str] = []
    statuses = wanted(summary, limit=MAX_COMMITS)
    for status in statuses:
        try:
            if _post_one(api, settings, context, status, summary.instance):
                posted += 1
            else:
                unchanged += 1
        except Refused as exc:
            if status.commit != summary.commit and exc.status in (404, 422):
                # A commit that submitted a live job, gone from the forge (a force-push):
                # nothing to show it on, every sync; not an error of this one.
                log.debug("commit %s is not on the forge: %s", status.commit[:12], exc)
                continue
            failures.append(f"{status.commit[:12]}: {exc}")
        except OutputError as exc:
            failures.append(f"{status.commit[:12]}: {exc}")
    if failures:
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        raise OutputError(
            f"{len(failures)} of {len(statuses)} commit statuses not posted: {failures[0]}{more}"
        )
    return Posting(posted, unchanged)


def _post_one(
    api: Api, settings: StatusSettings, context: str, status: Wanted, instance: str
) -> bool:
    provider = PROVIDERS[settings.provider]
    link = settings.url_template.format(commit=status.commit, instance=instance)
    state = provider.state_name(status)
    there = provider.read(api, settings.repository, status.commit, context)
    if there is not None and (there.state, there.description, there.target_url) == (
        state,
        status.description,
        link,
    ):
        return False
    body = {"state": state, "description": status.description}
    if link:
        body["target_url"] = link
    provider.post(api, settings.repository, status.commit, context, body)
    log.info("commit status %s on %s: %s", state, status.commit[:12], status.description)
    return True
